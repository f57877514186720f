"""Ultralytics' own checks of a command line, run up front: key=value parsing, model YAMLs, formats.

Copied rules of the seam, watched by the CLI check of ``CONTRACT``: its ``key=value`` parsing and checks, where it
finds a model YAML, the formats its exporter takes."""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import textwrap

from attn_yolo.ultralytics_api import special_commands, unscaled_yaml_path


def model_yaml_file(path) -> str | None:
    """The file ``yaml_model_load`` reads for a model YAML ``path`` (the path as written, found by Ultralytics'
    ``check_yaml``, else its scale-less name, ``unscaled_yaml_path``), or None where neither exists. Local names only:
    a URL is Ultralytics' to fetch."""
    from ultralytics.utils.checks import check_yaml

    return check_yaml(str(path), hard=False) or check_yaml(unscaled_yaml_path(path), hard=False) or None


def cli_overrides(argv: list[str], own_keys: dict | None = None) -> dict:
    """The ``key=value`` arguments of an Ultralytics command line as ``ultralytics.cfg.entrypoint`` reads them
    (``merge_equals_args``, ``parse_key_value_pair``, leading ``--`` and trailing ``,`` dropped), checked as it checks
    them (``check_dict_alignment``, with ``own_keys`` as further allowed keys so that its similar-key hints name them
    too, then ``check_cfg``'s types and ranges on a copy), without printing Ultralytics' CLI help. Words without ``=``
    (modes, tasks, flags) are left to the entrypoint. A command line with a special command (``settings
    runs_dir=...``, ``solutions count source=...``, in every spelling the entrypoint accepts) is the special
    command's to read: nothing is checked, ``{}``.

    Raises:
        SyntaxError: an unknown key or an unparsable pair (Ultralytics' message, with its similar-key hints).
        TypeError, ValueError: a value of the wrong type or out of range (``check_cfg``'s message).
    """
    import logging

    from ultralytics import cfg
    from ultralytics.utils import LOGGER

    special = {v for k in special_commands() for v in (k, k[0], k[:-1] if k.endswith("s") else k)}
    if {w.lower().lstrip("-") for w in argv if "=" not in w} & special:
        return {}
    known = {**cfg.DEFAULT_CFG_DICT, **dict.fromkeys((*cfg.TASKS, *cfg.MODES, *special_commands())), **(own_keys or {})}
    overrides, level = {}, LOGGER.level
    LOGGER.setLevel(logging.ERROR)  # check_dict_alignment logs the whole CLI help before it raises
    try:
        for a in cfg.merge_equals_args(argv):
            a = a[2:] if a.startswith("--") else a
            a = a[:-1] if a.endswith(",") else a
            if "=" not in a:
                continue
            try:
                k, v = cfg.parse_key_value_pair(a)
            except (NameError, SyntaxError, ValueError, AssertionError) as e:
                cfg.check_dict_alignment(known, {a: ""}, e)
                raise SyntaxError(str(e)) from e  # a known key with an empty value ("missing 'epochs' value")
            overrides[k] = v
        cfg.check_dict_alignment(known, overrides)
    finally:
        LOGGER.setLevel(level)
    cfg.check_cfg({k: v for k, v in overrides.items() if k not in (own_keys or {})})
    return overrides


def default_weights(overrides: dict) -> str:
    """The checkpoint Ultralytics' entrypoint loads when a command names no ``model=``: ``DEFAULT_CFG.model``, else
    its task's default (``TASK2MODEL``; detect's without ``task=``)."""
    from ultralytics.cfg import DEFAULT_CFG, TASK2MODEL

    return DEFAULT_CFG.model or TASK2MODEL.get(overrides.get("task") or "detect", TASK2MODEL["detect"])


def unreachable_asset(name: str) -> bool:
    """Whether loading checkpoint ``name`` would need a download that cannot happen: an official Ultralytics asset
    (``GITHUB_ASSETS_NAMES``) found neither as written nor in Ultralytics' ``weights_dir`` (``attempt_download_asset``
    looks in these two places), on a machine that is offline (``YOLO_OFFLINE=1``, or no DNS: Ultralytics' ``ONLINE``,
    its one look-up at import)."""
    from pathlib import Path

    from ultralytics.utils import ONLINE, SETTINGS
    from ultralytics.utils.downloads import GITHUB_ASSETS_NAMES

    if name not in GITHUB_ASSETS_NAMES or Path(name).exists() or (Path(SETTINGS["weights_dir"]) / name).exists():
        return False
    return not ONLINE


DATASET_ERROR = "Dataset '"
"""How the errors of Ultralytics' dataset checks begin (``BaseTrainer.get_dataset``'s RuntimeError, the validator's
FileNotFoundError): ``Dataset '<data>' error ❌ ...`` / ``... not found ❌``."""


def dataset_problem(data: str) -> str | None:
    """Why a dataset YAML cannot be used now, as Ultralytics' ``check_det_dataset`` finds it without downloading:
    its first line (a missing image folder, a missing key); None when it can, or when what is missing is Ultralytics'
    to fetch (the YAML has a ``download:`` and this machine is online)."""
    from ultralytics.data.utils import check_det_dataset
    from ultralytics.utils import ONLINE, YAML
    from ultralytics.utils.checks import check_yaml

    try:
        check_det_dataset(data, autodownload=False)
    except (OSError, KeyError, ValueError, SyntaxError) as e:
        with contextlib.suppress(Exception):
            if YAML.load(check_yaml(data)).get("download") and ONLINE:
                return None
        return (str(e).strip().splitlines() or [type(e).__name__])[0]  # Ultralytics adds a line on its settings
    return None


def dataset_error(e: BaseException) -> str | None:
    """The first line of one of Ultralytics' dataset errors raised while a command runs (``DATASET_ERROR``: e.g. the
    images deleted after the command's checks), else None."""
    text = str(e).strip()
    return text.splitlines()[0] if isinstance(e, (RuntimeError, OSError)) and text.startswith(DATASET_ERROR) else None


@functools.cache
def export_format_names() -> tuple[str, ...]:
    """Every ``format=`` Ultralytics' exporter takes: the ``Argument`` column of ``export_formats()`` and the aliases
    ``Exporter.__call__`` remaps (``tflite``, ``trt``, ``vitis``, ...), read from its ``fmt in {...}`` tests."""
    from ultralytics.engine.exporter import Exporter, export_formats

    names = [f for f in export_formats()["Argument"] if f != "-"]
    with contextlib.suppress(OSError, TypeError, SyntaxError):
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(Exporter.__call__)))):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "fmt"
                    and isinstance(node.ops[0], ast.In) and isinstance(node.comparators[0], ast.Set)):
                names += [e.value for e in node.comparators[0].elts
                          if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return tuple(dict.fromkeys(names))
