"""Experiment tracking: an ablation's runs grouped under one MLflow experiment, its summary logged as artifacts.

Active when Ultralytics' MLflow integration is (``yolo settings mlflow=True``, the default, and ``mlflow``
installed). Ultralytics' own callback (``ultralytics/utils/callbacks/mlflow.py``) logs each training run; it reads
the experiment and run names from ``MLFLOW_EXPERIMENT_NAME`` and ``MLFLOW_RUN``, which ``run_env`` sets for every run:
the experiment is the ablation's name (a ``MLFLOW_EXPERIMENT_NAME`` set by the user wins), runs are named
``<variant>-seed<k>``. Every run is tagged ``attn_yolo.out`` with the ablation's ``out`` folder (through MLflow's
``MLFLOW_RUN_CONTEXT``, tags that ``mlflow.start_run`` adds), so ablations of one config into different folders share
the experiment but can be told apart. ``log_summary`` adds one run named ``summary`` per ``out`` holding summary.md and
results.csv. The tracking
URI (``MLFLOW_TRACKING_URI``, else ``out/mlflow.db``) is resolved once by the driver and passed to every run, so that
worker processes and Ray workers log to the same store.

TensorBoard (``yolo settings tensorboard=True``) needs nothing here: Ultralytics writes its event files into each run
folder, so ``tensorboard --logdir <out>/runs`` shows the ablation's runs side by side, named ``<variant>-seed<k>``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

SUMMARY_RUN = "summary"
OUT_TAG = "attn_yolo.out"  # run tag: the ablation's out folder (absolute)


def mlflow_enabled() -> bool:
    """Whether Ultralytics' MLflow callback will log training runs (setting on, ``mlflow`` importable).

    As in that callback, runs under pytest are not logged, except in tests whose name contains ``test_mlflow``.
    """
    from ultralytics.utils import SETTINGS, TESTS_RUNNING

    if not SETTINGS.get("mlflow") or importlib.util.find_spec("mlflow") is None:
        return False
    return not TESTS_RUNNING or "test_mlflow" in os.environ.get("PYTEST_CURRENT_TEST", "")


def experiment_name(ablation_name: str) -> str:
    """The MLflow experiment of an ablation: ``MLFLOW_EXPERIMENT_NAME`` if the user set it, else the ablation's name."""
    return os.environ.get("MLFLOW_EXPERIMENT_NAME") or ablation_name


STORE_NAME = "mlflow.db"  # the ablation's own MLflow store, in its out folder, when no tracking URI is set


ARTIFACTS_NAME = "mlartifacts"  # the artifacts of the ablation's own store, in its out folder


def tracking_uri(out: Path, ablation_name: str | None = None) -> str:
    """The tracking URI the driver and every run log to: ``MLFLOW_TRACKING_URI`` when the user set one, else an
    SQLite store inside the ablation's ``out`` (``out/mlflow.db``), never MLflow's default in the working directory
    (a ``mlflow.db`` and ``mlruns/`` the user did not ask for). With ``ablation_name``, the experiment is made in the
    own store with its artifacts in ``out/mlartifacts`` (an SQLite store's default artifact root is ``./mlruns``)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    out = Path(out).resolve()
    uri = f"sqlite:///{out / STORE_NAME}"
    if ablation_name is not None:
        import logging

        from mlflow.tracking import MlflowClient

        said = logging.getLogger("mlflow.store.db.utils")  # "Creating initial MLflow database tables...": our store
        level = said.level
        said.setLevel(logging.WARNING)
        try:
            client = MlflowClient(uri)
            name = experiment_name(ablation_name)
            if client.get_experiment_by_name(name) is None:
                client.create_experiment(name, artifact_location=(out / ARTIFACTS_NAME).as_uri())
        finally:
            said.setLevel(level)
    return uri


def run_env(ablation_name: str, run_name: str, uri: str, out: Path) -> dict[str, str]:
    """Environment variables for one training run, read by Ultralytics' MLflow callback (names, URI) and by
    ``mlflow.start_run`` (``MLFLOW_RUN_CONTEXT``: tags, the user's own kept, plus ``OUT_TAG``)."""
    try:
        tags = dict(json.loads(os.environ.get("MLFLOW_RUN_CONTEXT") or "{}"))
    except (ValueError, TypeError):  # not a JSON mapping: MLflow could not use it either
        tags = {}
    tags[OUT_TAG] = str(out)
    return {"MLFLOW_EXPERIMENT_NAME": experiment_name(ablation_name), "MLFLOW_RUN": run_name,
            "MLFLOW_TRACKING_URI": uri, "MLFLOW_RUN_CONTEXT": json.dumps(tags)}  # fmt: skip


def log_summary(ablation_name: str, uri: str, out: Path, files: list[Path]) -> str:
    """Log ``files`` (summary.md, results.csv) as artifacts of the ``summary`` run of ``out`` (tagged ``OUT_TAG``;
    made once, then reused on reruns into the same ``out``); returns the run id."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    exp = mlflow.set_experiment(experiment_name(ablation_name))
    summaries = mlflow.search_runs([exp.experiment_id], filter_string=f"tags.mlflow.runName = '{SUMMARY_RUN}'",
                                   output_format="list")  # fmt: skip
    found = [r for r in summaries if r.data.tags.get(OUT_TAG) == str(out)]  # matched here: no quoting of the path
    run_id = found[0].info.run_id if found else None
    with mlflow.start_run(run_id=run_id, run_name=SUMMARY_RUN, tags={OUT_TAG: str(out)}) as run:
        for f in files:
            if Path(f).exists():
                mlflow.log_artifact(str(f))
        return run.info.run_id
