"""Ablation runner: model variants × seeds trained with Ultralytics, one table with statistics, and plots.

    attn-yolo ablate                                          # quick default: synthetic-shapes, baseline vs CBAM
    attn-yolo ablate configs/ablation/coco128-quick.yaml
    attn-yolo ablate my.yaml out=runs/ablate/try2 epochs=5 seeds=[0,1]   # overrides: config keys or train args

Config (YAML). Input paths (``data``, ``model``, ``base``, ``train.pretrained``) resolve relative to the config
file's folder first, then as given (working directory, Ultralytics' built-in configs); ``out`` resolves relative to
the working directory, like Ultralytics' ``project``::

    data: synthetic                 # an Ultralytics dataset YAML, or `synthetic` (generated on first use, no download)
    variants:                       # the first one, or the one with `baseline: true`, is the baseline
      - {name: baseline, model: yolo11n.yaml}
      - {name: se, model: ../../models/yolo11n-se.yaml}                               # a model YAML
      - {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone, args: [16, 7]}   # an insert spec
    seeds: [0, 1, 2]
    train: {epochs: 10, imgsz: 192, batch: 16}   # passed to YOLO.train (any Ultralytics train argument)
    out: runs/ablate/synthetic-quick
    latency: {repeats: 50, warmup: 10}           # batch-1 forward timing of best.pt, median of `repeats`
    devices: [0, 1]                 # optional: run in parallel, one run per device at a time
    copy_data: auto                 # copy the dataset into out/data first: auto (if read-only) | true | false

Outputs in ``out``: ``results.csv`` (one row per run, rewritten as each run ends), ``summary.md`` (mean ± std per
variant, paired differences to the baseline with 95% CI, p-value and verdict), ``ablation.png`` (mAP50-95 vs GFLOPs),
``curves.png`` (validation mAP per epoch), ``config.yaml`` (the resolved config) and ``runs/<variant>-seed<k>/``
(Ultralytics' run folders).

Re-running the same command skips runs recorded ``ok`` in results.csv with the same settings; it redoes runs that are
missing (interrupted), that failed, or whose settings changed (model, data, train args or seed). The exit code is 0
when every run is ok, 1 when any failed, 130 after Ctrl-C and 2 for a bad config.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
import shutil
import stat
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import yaml

from attn_yolo.args import UsageError

# The default ablation (`attn-yolo ablate` without a config). configs/ablation/synthetic-quick.yaml is this text.
DEFAULT_CONFIG_NAME = "synthetic-quick"
DEFAULT_CONFIG_YAML = """\
# Quick default ablation: does CBAM (channel + spatial attention) help yolo11n on the synthetic-shapes dataset?
# `attn-yolo ablate` (no config) runs exactly this; it is embedded in attn_yolo/ablate.py, so it also works outside the
# repository. Budget: 2 variants x 3 seeds, yolo11n from scratch, about 10 minutes on 2 CPU cores.
data: synthetic  # attn_yolo.synthetic: 4 shape classes on cluttered backgrounds, generated on first use (no download)
variants:
  - {name: baseline, model: yolo11n.yaml}
  - {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone, args: [16, 7]}  # CBAM after backbone P3/P4/P5
seeds: [0, 1, 2]
train:  # Ultralytics train arguments: attn_yolo.synthetic.QUICK_TRAIN_ARGS (2 epochs of 1000 images at 128 px)
  epochs: 2
  imgsz: 128
  batch: 8
  nbs: 8
  optimizer: AdamW
  lr0: 0.003
  warmup_epochs: 0.3
  mosaic: 0.0
  close_mosaic: 0
  scale: 0.0
  translate: 0.0
  hsv_h: 0.0
  hsv_s: 0.0
  hsv_v: 0.0
  val: true  # validate every epoch, for curves.png
  plots: false
out: runs/ablate/synthetic-quick  # relative to the working directory
latency: {repeats: 50, warmup: 10}
"""

CONFIG_KEYS = ("data", "variants", "seeds", "train", "out", "latency", "devices", "copy_data")
MODEL_VARIANT_KEYS = ("name", "model", "baseline")
INSERT_VARIANT_KEYS = ("name", "base", "module", "at", "args", "baseline")
LATENCY_DEFAULTS = {"repeats": 50, "warmup": 10}
RUNNER_TRAIN_KEYS = {  # Ultralytics train args the runner sets itself → the config key to use instead
    "data": "data",
    "seed": "seeds",
    "model": "variants",
    "project": "out",
    "name": "out",
    "exist_ok": "out",
    "resume": "re-run the same command",
    "mode": None,
    "task": None,
}
UNFINGERPRINTED_TRAIN_KEYS = {"device", "plots", "verbose"}  # train args that do not change a run's result
SYNTHETIC = "synthetic"  # `data:` keyword for the embedded dataset

CSV_FIELDS = (
    "variant", "seed", "status", "params", "gflops", "precision", "recall", "map50", "map50_95", "best_epoch",
    "epochs", "train_time_s", "latency_ms", "device", "run_dir", "model", "error", "fingerprint",
)  # fmt: skip
INT_FIELDS = {"seed", "params", "best_epoch", "epochs"}
FLOAT_FIELDS = {"gflops", "precision", "recall", "map50", "map50_95", "train_time_s", "latency_ms"}

# Summary metrics: results.csv column, label, decimals, sense (+1 higher is better, -1 lower is better).
METRICS = (
    ("precision", "P", 4, +1),
    ("recall", "R", 4, +1),
    ("map50", "mAP50", 4, +1),
    ("map50_95", "mAP50-95", 4, +1),
    ("best_epoch", "best epoch", 1, 0),
    ("train_time_s", "train time (s)", 1, 0),
    ("latency_ms", "latency (ms)", 2, -1),
)
PRIMARY = "map50_95"
CONFIDENCE = 0.95


class ConfigError(UsageError):
    """The ablation config has problems; ``problems`` lists every one as ``"<config key>: <message>"``."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s) in the ablation config:\n{lines}")


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN/Inf loss; the run is recorded as failed."""


@dataclasses.dataclass
class Variant:
    """One model variant: where the trainer builds it from, and its size at the config's imgsz."""

    name: str
    model: str  # model YAML path (or Ultralytics name) to train from; insert specs: file name written per run
    model_dict: dict | None  # the model dict of an insert spec (written to the run folder), None for model YAMLs
    params: int  # parameters of the model built with the dataset's nc
    gflops: float  # Ultralytics get_flops at the config's imgsz
    definition: str  # canonical JSON of the model definition (for the runs' fingerprints)


@dataclasses.dataclass
class Ablation:
    """A validated ablation config with resolved paths."""

    source: str  # config file, or "<default synthetic-quick>"
    name: str
    data: str  # dataset YAML (absolute)
    data_id: str  # fingerprint of the dataset YAML
    nc: int
    variants: list[Variant]
    baseline: str
    seeds: list[int]
    train: dict
    imgsz: int
    out: Path
    latency: dict
    devices: list  # [] → sequential, in this process, on train.device
    copy_data: bool | str
    config: dict  # resolved config as written to out/config.yaml


@dataclasses.dataclass
class RunSpec:
    """Everything one training run needs; picklable (parallel runs execute in worker processes)."""

    variant: str
    seed: int
    model: str
    model_dict: dict | None
    data: str
    train: dict
    imgsz: int
    latency: dict
    run_dir: str
    params: int
    gflops: float
    fingerprint: str


# --------------------------------------------------------------------------------------------------- config loading


def load_config(path: str | Path | None) -> tuple[dict, Path, str, str]:
    """Read an ablation config.

    Args:
        path: config YAML, or None for the embedded default (``DEFAULT_CONFIG_YAML``).

    Returns:
        (raw config dict, folder that relative input paths resolve against, config name, source for messages).

    Raises:
        UsageError: the file is missing or is not a YAML mapping.
    """
    if path is None:
        text, base, name = DEFAULT_CONFIG_YAML, Path.cwd(), DEFAULT_CONFIG_NAME
        source = f"<default {DEFAULT_CONFIG_NAME}>"
    else:
        p = Path(path).expanduser()
        if not p.is_file():
            raise UsageError(f"attn-yolo ablate: config file not found: {path}")
        text, base, name, source = p.read_text(), p.resolve().parent, p.stem, str(path)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"{source}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise UsageError(f"{source}: expected a mapping with keys {', '.join(CONFIG_KEYS)}, got {type(raw).__name__}")
    return raw, base, name, source


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply command-line ``key=value`` overrides: top-level config keys, or Ultralytics train args (into ``train``).

    Raises:
        UsageError: a token without ``=``, ``variants=...``, or a key that is neither (naming the closest key).
    """
    from ultralytics.cfg import DEFAULT_CFG_DICT, smart_value

    raw = copy.deepcopy(raw)
    for tok in overrides:
        key, eq, value = tok.partition("=")
        if not eq or not key:
            raise UsageError(f"attn-yolo ablate: expected key=value after the config, got {tok!r}")
        if key == "variants":
            raise UsageError("attn-yolo ablate: variants cannot be overridden on the command line; edit the config")
        v = smart_value(value)
        v = list(v) if isinstance(v, tuple) else v  # seeds=0,1
        if key == "devices" and isinstance(v, str):  # devices=0,1 or devices=[cpu,cpu]
            v = [smart_value(x.strip()) for x in v.strip("[]").split(",") if x.strip()]
        if key in CONFIG_KEYS:
            raw[key] = v
        elif key in DEFAULT_CFG_DICT:
            train = raw.get("train")
            raw["train"] = {**(train if isinstance(train, dict) else {}), key: v}
        else:
            close = difflib.get_close_matches(key, [*CONFIG_KEYS, *DEFAULT_CFG_DICT], n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UsageError(
                f"attn-yolo ablate: unknown key {key!r}.{hint} Keys: {', '.join(CONFIG_KEYS)}, or any Ultralytics "
                "train argument (goes into `train`)"
            )
    return raw


# ------------------------------------------------------------------------------------------------------ validation


def _unknown(keys, allowed, where: str) -> list[str]:
    out = []
    for k in keys:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), list(allowed), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            out.append(f"{where}{k}: unknown key{hint}; allowed: {', '.join(allowed)}")
    return out


def _resolve_input(value: str, base: Path) -> str:
    """A path relative to the config folder if it exists there (for a model YAML: also its scale-less file, as
    Ultralytics resolves ``yolo11n-se.yaml`` to ``yolo11-se.yaml``), else the value as given."""
    p = (base / Path(value).expanduser()).resolve()
    unified = Path(re.sub(r"(\d+)([nslmx])(.+)?$", r"\1\3", str(p)))
    return str(p) if p.exists() or (p.suffix in (".yaml", ".yml") and unified.exists()) else value


def _first_line(e: BaseException, limit: int = 400) -> str:
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg}"[:limit]


def _definition(d: dict) -> str:
    return json.dumps({k: v for k, v in d.items() if k != "yaml_file"}, sort_keys=True, default=str)


def insert_file_name(base: str, name: str) -> str:
    """File name of an insert spec's model YAML: keeps the base's name, so Ultralytics reads the same scale from it
    (``yolo11n.yaml`` + ``cbam`` → ``yolo11n-cbam.yaml``)."""
    return f"{Path(base).stem}-{name}.yaml"


_SIZES: dict[tuple, tuple[int, float]] = {}  # (model definition, nc, imgsz) → (params, GFLOPs) of models built here


def _check_variants(
    raw_variants, base: Path, nc: int | None, imgsz: int, pretrained: dict | None = None
) -> tuple[list[Variant], str | None, list]:
    """Validate and build every variant; returns (variants, baseline name, problems).

    With ``pretrained`` (the model dict of ``train.pretrained``), each variant must be that model, or that model with
    attention blocks inserted, so that ``attn_yolo.transfer`` can carry every weight to its layer.
    """
    import torch
    from ultralytics.nn.tasks import DetectionModel, guess_model_task, yaml_model_load
    from ultralytics.utils.torch_utils import get_flops, get_num_params

    from attn_yolo.insertion import InsertionError, insert, layer_map
    from attn_yolo.registry import MODULES

    problems, variants, names, baseline = [], [], {}, None
    if not isinstance(raw_variants, list) or not raw_variants:
        return [], None, ["variants: expected a non-empty list of {name, model} or {name, base, module, at, args}"]
    flagged = [i for i, v in enumerate(raw_variants) if isinstance(v, dict) and v.get("baseline") is True]
    if len(flagged) > 1:
        problems.append(f"variants: more than one has `baseline: true` (variants{flagged})")
    with tempfile.TemporaryDirectory(prefix="attn-yolo-ablate-") as tmp:
        for i, v in enumerate(raw_variants):
            key = f"variants[{i}]"
            if not isinstance(v, dict):
                problems.append(f"{key}: expected a mapping {{name, model}} or {{name, base, module, at, args}}")
                continue
            n_before = len(problems)
            name = v.get("name")
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", name):
                problems.append(f"{key}.name: {name!r}; expected a name of letters, digits, '_', '.', '+', '-'")
            elif name in names:
                problems.append(f"{key}.name: duplicate variant name {name!r} (also variants[{names[name]}])")
            else:
                names[name] = i
            key = f"{key} ({name})" if isinstance(name, str) else key
            if "baseline" in v and not isinstance(v["baseline"], bool):
                problems.append(f"{key}.baseline: expected true or false, got {v['baseline']!r}")
            if ("model" in v) == ("base" in v):
                problems.append(f"{key}: give either `model` (a model YAML) or `base` + `module` (an insert spec)")
                continue
            is_insert = "base" in v
            problems += _unknown(v, INSERT_VARIANT_KEYS if is_insert else MODEL_VARIANT_KEYS, f"{key}.")
            if is_insert:
                if "module" not in v:
                    problems.append(f"{key}.module: missing; one of {', '.join(MODULES)}")
                elif v["module"] not in MODULES:
                    close = difflib.get_close_matches(str(v["module"]), list(MODULES), n=1, cutoff=0.5)
                    hint = f" (did you mean {close[0]}?)" if close else ""
                    problems.append(
                        f"{key}.module: unknown module {v['module']!r}{hint}; one of {', '.join(MODULES)}"
                    )
                if "args" in v and not isinstance(v["args"], list):
                    problems.append(f"{key}.args: expected a list of hyperparameters, got {v['args']!r}")
                if not isinstance(v["base"], str):
                    problems.append(f"{key}.base: expected a model YAML path, got {v['base']!r}")
            elif not isinstance(v["model"], str) or not v["model"].lower().endswith((".yaml", ".yml")):
                problems.append(f"{key}.model: expected a model YAML (.yaml), got {v['model']!r}; for weights use "
                                "train.pretrained")
            if len(problems) > n_before or not isinstance(name, str):
                continue
            if v.get("baseline") is True or (not flagged and i == 0):
                baseline = name
            # Build at the config's scale and imgsz, as the trainer will.
            try:
                if is_insert:
                    spec = {k: v[k] for k in ("module", "at", "args") if k in v}
                    base_model = _resolve_input(v["base"], base)
                    d = insert(base=base_model, **spec)
                    path = Path(tmp) / insert_file_name(base_model, name)
                    path.write_text(yaml.safe_dump(d, sort_keys=False))
                    model, model_dict = path.name, d
                else:
                    model, model_dict = _resolve_input(v["model"], base), None
                    path = model
                d = yaml_model_load(path)
                if (task := guess_model_task(d)) != "detect":
                    problems.append(f"{key}{'' if is_insert else '.model'}: is a {task} model; ablations train detect models")
                    continue
                size_key = (_definition(d), nc, imgsz)
                if size_key not in _SIZES:  # built and measured before in this process: same answer
                    m = DetectionModel(str(path), nc=nc, verbose=False).eval()
                    with torch.no_grad():
                        m(torch.zeros(1, 3, imgsz, imgsz))  # runs at the config's imgsz too
                        _SIZES[size_key] = get_num_params(m), get_flops(m, imgsz)
                params, gflops = _SIZES[size_key]
            except Exception as e:
                where = "" if is_insert else ".model"
                problems.append(f"{key}{where}: does not build: {_first_line(e)}")
                continue
            if pretrained is not None:
                try:
                    layer_map(pretrained, d)
                except InsertionError as e:
                    problems.append(f"{key}: is not the train.pretrained model (with attention blocks inserted), so "
                                    f"its weights cannot be carried over: {_first_line(e)}")
                    continue
            variants.append(Variant(name, model, model_dict, params, gflops, _definition(d)))
    return variants, baseline, problems


def _check_data(raw, base: Path) -> tuple[str | None, str, int | None, list[str]]:
    """Resolve and check the dataset; returns (data yaml, its fingerprint, nc, problems)."""
    from ultralytics.data.utils import check_det_dataset

    if raw is None:
        return None, "", None, ["data: missing; an Ultralytics dataset YAML or `synthetic`"]
    if not isinstance(raw, str):
        return None, "", None, [f"data: expected a dataset YAML path or `synthetic`, got {raw!r}"]
    if raw == SYNTHETIC:
        from attn_yolo.synthetic import default_data_yaml

        print("attn-yolo ablate: preparing the synthetic-shapes dataset (generated once, then cached) ...", flush=True)
        path = str(default_data_yaml())
    else:
        path = _resolve_input(raw, base)
    try:
        info = check_det_dataset(path, autodownload=False)
    except Exception as e:
        return None, "", None, [f"data: {raw!r} does not resolve to a usable dataset: {_first_line(e)}"]
    p = Path(path)
    data_id = hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.is_file() else path
    return str(p.resolve()) if p.is_file() else path, f"{raw}:{data_id}", int(info["nc"]), []


def _check_train(raw, base: Path, has_devices: bool) -> tuple[dict, list[str]]:
    from ultralytics.cfg import DEFAULT_CFG_DICT, check_cfg
    from ultralytics.utils.downloads import GITHUB_ASSETS_NAMES, attempt_download_asset

    if raw is None:
        return {}, []
    if not isinstance(raw, dict):
        return {}, [f"train: expected a mapping of Ultralytics train arguments, got {raw!r}"]
    train, problems = {}, []
    for k, v in raw.items():
        if k in RUNNER_TRAIN_KEYS:
            use = RUNNER_TRAIN_KEYS[k]
            problems.append(f"train.{k}: set by the ablation runner{f' (use {use})' if use else ''}")
            continue
        if k not in DEFAULT_CFG_DICT:
            close = difflib.get_close_matches(str(k), list(DEFAULT_CFG_DICT), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(f"train.{k}: unknown Ultralytics train argument{hint}")
            continue
        one = {k: v}
        try:
            check_cfg(one)
        except (TypeError, ValueError, SyntaxError) as e:
            problems.append(f"train.{k}: {_first_line(e)}")
            continue
        train[k] = one[k]
    if "device" in train and has_devices:
        problems.append("train.device: not with `devices` (each run gets one of `devices`); remove one of them")
    imgsz = train.get("imgsz", DEFAULT_CFG_DICT["imgsz"])
    if not isinstance(imgsz, int) or isinstance(imgsz, bool) or imgsz < 32:
        problems.append(f"train.imgsz: {imgsz!r}; expected an int >= 32 (square training size, pixels)")
    pre = train.get("pretrained")
    if isinstance(pre, str):
        path = _resolve_input(pre, base)
        if not Path(path).exists() and Path(pre).name in GITHUB_ASSETS_NAMES and Path(pre).name == pre:
            try:
                path = str(attempt_download_asset(pre))
            except Exception:
                pass
        if Path(path).exists():
            train["pretrained"] = str(Path(path).resolve())
        else:
            problems.append(f"train.pretrained: weights file not found: {pre!r} (relative to the config's folder)")
    return train, problems


def _check_devices(raw) -> tuple[list, list[str]]:
    if raw is None:
        return [], []
    devices = raw if isinstance(raw, list) else [raw]
    problems = []
    import torch

    n_cuda = torch.cuda.device_count()
    for i, d in enumerate(devices):
        if isinstance(d, bool) or not isinstance(d, (int, str)):
            problems.append(f"devices[{i}]: {d!r}; expected a CUDA index, 'cpu', 'mps' or 'cuda:N'")
            continue
        s = str(d).lower().removeprefix("cuda:")
        if s.isdigit() and int(s) >= n_cuda:
            problems.append(f"devices[{i}]: CUDA device {s} not available ({n_cuda} CUDA device(s) found)")
        elif not s.isdigit() and s not in ("cpu", "mps"):
            problems.append(f"devices[{i}]: {d!r}; expected a CUDA index, 'cpu', 'mps' or 'cuda:N'")
    return [str(d) for d in devices], problems


def _check_int_list(raw, key: str, default: list[int]) -> tuple[list[int], list[str]]:
    if raw is None:
        return default, []
    vals = raw if isinstance(raw, list) else [raw]
    bad = [v for v in vals if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if not vals or bad:
        return [], [f"{key}: {raw!r}; expected a non-empty list of non-negative ints"]
    if len(set(vals)) != len(vals):
        return [], [f"{key}: {raw!r}; has duplicates"]
    return list(vals), []


def validate(raw: dict, base: Path, name: str = "ablation", source: str = "config") -> Ablation:
    """Check a whole config before any training, and build every variant at the config's scale and imgsz.

    Args:
        raw: config as loaded (``load_config``) and overridden (``apply_overrides``).
        base: folder that relative input paths resolve against (the config file's folder).
        name: config name (default output folder ``runs/ablate/<name>``).
        source: where the config came from, for the error message.

    Returns:
        The validated ``Ablation``.

    Raises:
        ConfigError: listing every problem found, each prefixed by the config key it came from.
    """
    from ultralytics.cfg import DEFAULT_CFG_DICT

    problems = _unknown(raw, CONFIG_KEYS, "")
    devices, p = _check_devices(raw.get("devices"))
    problems += p
    train, p = _check_train(raw.get("train"), base, bool(devices))
    problems += p
    imgsz = train.get("imgsz", DEFAULT_CFG_DICT["imgsz"])
    imgsz = imgsz if isinstance(imgsz, int) and imgsz >= 32 else 640
    seeds, p = _check_int_list(raw.get("seeds"), "seeds", [0])
    problems += p
    latency = dict(LATENCY_DEFAULTS)
    lat = raw.get("latency")
    if lat is not None and not isinstance(lat, dict):
        problems.append(f"latency: expected a mapping with keys {', '.join(LATENCY_DEFAULTS)}, got {lat!r}")
    elif lat:
        problems += _unknown(lat, LATENCY_DEFAULTS, "latency.")
        for k, lo in (("repeats", 1), ("warmup", 0)):
            v = lat.get(k, latency[k])
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                problems.append(f"latency.{k}: {v!r}; expected an int >= {lo}")
            else:
                latency[k] = v
    out = raw.get("out", f"runs/ablate/{name}")
    if not isinstance(out, str) or not out:
        problems.append(f"out: expected a folder path, got {out!r}")
        out = f"runs/ablate/{name}"
    copy_data = raw.get("copy_data", "auto")
    if copy_data not in (True, False, "auto"):
        problems.append(f"copy_data: {copy_data!r}; expected auto, true or false")
    data, data_id, nc, p = _check_data(raw.get("data"), base)
    problems += p
    pretrained = None
    if isinstance(train.get("pretrained"), str):
        from ultralytics.nn.tasks import load_checkpoint

        try:
            pretrained = load_checkpoint(train["pretrained"])[0].yaml
        except Exception as e:
            problems.append(f"train.pretrained: not an Ultralytics checkpoint: {_first_line(e)}")
    variants, baseline, p = _check_variants(raw.get("variants"), base, nc, imgsz, pretrained)
    problems += p
    if problems:
        raise ConfigError(source, problems)
    config = {
        "data": data,
        "variants": raw["variants"],
        "seeds": seeds,
        "train": train,
        "out": str(Path(out).resolve()),
        "latency": latency,
        "devices": devices,
        "copy_data": copy_data,
        "source": source,
    }
    return Ablation(source, name, data, data_id, nc, variants, baseline, seeds, train, imgsz, Path(out).resolve(),
                    latency, devices, copy_data, config)


# ------------------------------------------------------------------------------------------------------------ data


def _read_only(folder: Path) -> bool:
    """True when ``folder`` cannot or should not be written: no access, or no write permission bit at all (a folder
    made read-only on purpose, which root could still write to)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return True
    return not os.access(folder, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def prepare_data(ab: Ablation) -> str:
    """Return the dataset YAML to train on; copies the dataset into ``out/data/<name>`` when ``copy_data`` says so.

    Ultralytics writes a labels ``*.cache`` next to each labels folder; ``copy_data: auto`` copies a dataset whose
    labels folders are read-only (like ../shared/data/coco128) so that nothing is written there.
    """
    from ultralytics.data.utils import check_det_dataset, img2label_paths

    info = check_det_dataset(ab.data, autodownload=False)
    splits = {k: info[k] for k in ("train", "val", "test") if info.get(k)}
    if ab.copy_data == "auto":
        label_dirs = [Path(img2label_paths([str(Path(p) / "x.jpg")])[0]).parent.parent for v in splits.values()
                      for p in (v if isinstance(v, list) else [v])]
        if not any(_read_only(d) for d in label_dirs if d.exists()):
            return ab.data
    elif not ab.copy_data:
        return ab.data
    root = Path(info["path"]).resolve()
    dest = ab.out / "data" / root.name
    target = dest / "data.yaml"
    if target.exists():
        return str(target)
    rel = {}
    for k, v in splits.items():
        rel[k] = []
        for p in v if isinstance(v, list) else [v]:
            p = Path(p).resolve()
            if not p.is_relative_to(root):
                raise ValueError(f"copy_data: {k} path {p} lies outside the dataset root {root}; set copy_data: false")
            rel[k].append(str(p.relative_to(root)))
        rel[k] = rel[k] if isinstance(v, list) else rel[k][0]
    print(f"attn-yolo ablate: copying dataset {root} -> {dest} (copy_data={ab.copy_data})", flush=True)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns("*.cache"))
    for f in dest.rglob("*"):  # the copy must be writable for Ultralytics' label cache
        f.chmod(f.stat().st_mode | stat.S_IWUSR)
    dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
    meta = {**yaml.safe_load(Path(ab.data).read_text()), "path": str(dest), **rel}
    target.write_text(yaml.safe_dump(meta, sort_keys=False))  # written last: marks the copy complete
    return str(target)


# -------------------------------------------------------------------------------------------------------- one run


def plan(ab: Ablation, data: str) -> list[RunSpec]:
    """Every (variant, seed) run of the ablation, variant-major in config order."""
    train_id = {k: v for k, v in sorted(ab.train.items()) if k not in UNFINGERPRINTED_TRAIN_KEYS}
    specs = []
    for v in ab.variants:
        for seed in ab.seeds:
            key = json.dumps([v.definition, ab.data_id, train_id, seed], sort_keys=True, default=str)
            specs.append(RunSpec(
                variant=v.name, seed=seed, model=v.model, model_dict=v.model_dict, data=data, train=dict(ab.train),
                imgsz=ab.imgsz, latency=dict(ab.latency), run_dir=str(ab.out / "runs" / f"{v.name}-seed{seed}"),
                params=v.params, gflops=v.gflops, fingerprint=hashlib.sha256(key.encode()).hexdigest()[:16],
            ))  # fmt: skip
    return specs


def check_finite_loss(trainer) -> None:
    """Ultralytics ``on_train_epoch_end`` callback: raise ``NonFiniteLossError`` when the epoch's mean loss is NaN/Inf.

    Ultralytics continues after a NaN loss in the first epoch and retries later ones from last.pt; an ablation
    records such a run as failed instead.
    """
    tloss = getattr(trainer, "tloss", None)
    if tloss is None:
        return
    items = tloss.items() if isinstance(tloss, dict) else enumerate(tloss.reshape(-1).tolist())
    values = {str(k): float(v) for k, v in items}
    if not all(math.isfinite(v) for v in values.values()):
        shown = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
        raise NonFiniteLossError(f"non-finite training loss in epoch {trainer.epoch + 1}: {shown}")


def measure_latency(weights: str | Path, imgsz: int, device=None, repeats: int = 50, warmup: int = 10) -> float:
    """Median batch-1 forward time of a checkpoint, in ms: fused, fp32, eval, no grad, ``imgsz`` × ``imgsz`` input.

    Args:
        weights: Ultralytics checkpoint (best.pt).
        imgsz: input side, pixels.
        device: Ultralytics device string (``"cpu"``, ``"0"``, ``""`` for auto); the first of a list is used.
        repeats: timed forward passes (the median is returned).
        warmup: untimed forward passes before.
    """
    import torch
    from ultralytics.nn.tasks import load_checkpoint
    from ultralytics.utils.torch_utils import select_device

    dev = select_device(str(device or "").split(",")[0], verbose=False)
    model, _ = load_checkpoint(weights, device=dev, fuse=True)
    x = torch.zeros(1, 3, imgsz, imgsz, device=dev)
    times = []
    with torch.inference_mode():
        for i in range(warmup + repeats):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            model(x)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _epoch_table(csv_path: Path) -> dict[str, list[float]]:
    """Columns of an Ultralytics run's results.csv (stripped names → floats)."""
    if not csv_path.exists():
        return {}
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = {}
    for row in rows:
        for k, v in row.items():
            try:
                cols.setdefault(k.strip(), []).append(float(v))
            except (TypeError, ValueError):
                cols.setdefault(k.strip(), []).append(math.nan)
    return cols


def _box_metrics(metrics) -> dict | None:
    d = getattr(metrics, "results_dict", metrics)
    if not isinstance(d, dict) or "metrics/mAP50-95(B)" not in d:
        return None
    return {
        "precision": float(d["metrics/precision(B)"]),
        "recall": float(d["metrics/recall(B)"]),
        "map50": float(d["metrics/mAP50(B)"]),
        "map50_95": float(d["metrics/mAP50-95(B)"]),
    }


def execute_run(spec: RunSpec, device: str | None = None) -> dict:
    """Train one variant with one seed, validate its best checkpoint, time it; never raises for a failed run.

    The run folder is emptied first (a run is redone from scratch). An insert spec's model dict is written to the
    run folder as YAML and trained from there.

    Args:
        spec: the run.
        device: device for this run (from ``devices``), or None to use ``spec.train['device']``.

    Returns:
        The results.csv row: status ``ok``, or ``failed`` with the error (traceback in ``<run_dir>/error.txt``).
    """
    from ultralytics import YOLO  # attn_yolo (this package) has registered the blocks in this process

    run_dir = Path(spec.run_dir)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    model = spec.model
    if spec.model_dict is not None:
        model = str(run_dir / spec.model)
        head = f"# attn-yolo ablate: variant {spec.variant}, made by attn_yolo.insert (spec in the ablation's config)\n"
        Path(model).write_text(head + yaml.safe_dump(spec.model_dict, sort_keys=False))
    train = dict(spec.train)
    if device is not None:
        train["device"] = device
    row = {
        "variant": spec.variant, "seed": spec.seed, "status": "failed", "params": spec.params, "gflops": spec.gflops,
        "device": str(train.get("device", "")) or "auto", "run_dir": str(run_dir), "model": model, "error": "",
        "fingerprint": spec.fingerprint,
    }  # fmt: skip
    t0 = time.perf_counter()
    try:
        yolo = YOLO(model)
        if isinstance(train.get("pretrained"), str):  # carry every weight to its layer, also past inserted blocks
            from attn_yolo.insertion import transfer

            print(f"attn-yolo ablate: {transfer(train.pop('pretrained'), yolo, strict=False, verbose=False)}")
        yolo.add_callback("on_train_epoch_end", check_finite_loss)
        metrics = yolo.train(
            data=spec.data, seed=spec.seed, project=str(run_dir.parent), name=run_dir.name, exist_ok=True, **train
        )
        row["train_time_s"] = time.perf_counter() - t0
        best = run_dir / "weights" / "best.pt"
        if not best.exists():
            raise FileNotFoundError(f"training wrote no {best}")
        box = _box_metrics(metrics)
        if box is None:  # e.g. multi-GPU training validates in its worker: validate best.pt here
            box = _box_metrics(YOLO(str(best)).val(
                data=spec.data, imgsz=spec.imgsz, batch=train.get("batch", 16),
                device=str(train.get("device", "")).split(",")[0],
                plots=False, project=str(run_dir), name="val", exist_ok=True,
            ))  # fmt: skip
        row.update(box)
        epochs = _epoch_table(run_dir / "results.csv")
        curve = epochs.get("metrics/mAP50-95(B)", [])
        row["epochs"] = len(curve)
        if curve:  # Ultralytics 8.4 saves best.pt at the epoch of best fitness = mAP50-95 (first on ties)
            row["best_epoch"] = int(epochs["epoch"][max(range(len(curve)), key=lambda i: (curve[i], -i))])
        if not all(math.isfinite(v) for v in box.values()):
            raise NonFiniteLossError(f"non-finite validation metrics of best.pt: {box}")
        row["latency_ms"] = measure_latency(best, spec.imgsz, train.get("device"), **spec.latency)
        row["status"] = "ok"
    except Exception as e:
        row.setdefault("train_time_s", time.perf_counter() - t0)
        row["error"] = _first_line(e)
        (run_dir / "error.txt").write_text(traceback.format_exc())
    return row


# ------------------------------------------------------------------------------------------------------ results.csv


def read_results(path: Path) -> list[dict]:
    """Rows of an ablation results.csv, numbers parsed (empty cells → None)."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for k in INT_FIELDS | FLOAT_FIELDS:
            v = row.get(k)
            row[k] = None if v in (None, "") else int(float(v)) if k in INT_FIELDS else float(v)
    return rows


def write_results(path: Path, rows: list[dict]) -> None:
    """Write results.csv atomically (a temporary file renamed over the old one)."""
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else "" if v is None else v) for k, v in row.items()})
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------------- statistics


def paired_difference(diffs: list[float], confidence: float = CONFIDENCE) -> dict:
    """Mean of paired differences (variant − baseline, one per seed), its t-distribution CI and paired t-test p.

    Returns:
        dict with ``n``, ``mean``, ``lo``, ``hi`` (CI bounds) and ``p`` (two-sided); CI and p are NaN for n < 2.
        Identical differences (zero spread) give a CI of zero width and p = 0 (or 1 when they are all 0).
    """
    from scipy.stats import t

    n = len(diffs)
    mean = statistics.fmean(diffs) if n else math.nan
    if n < 2:
        return {"n": n, "mean": mean, "lo": math.nan, "hi": math.nan, "p": math.nan}
    se = statistics.stdev(diffs) / math.sqrt(n)
    if se == 0:
        return {"n": n, "mean": mean, "lo": mean, "hi": mean, "p": 1.0 if mean == 0 else 0.0}
    half = float(t.ppf(0.5 + confidence / 2, n - 1)) * se
    return {"n": n, "mean": mean, "lo": mean - half, "hi": mean + half, "p": float(2 * t.sf(abs(mean) / se, n - 1))}


def verdict(stats: dict, sense: int = +1) -> str:
    """``better`` / ``worse`` when the CI excludes 0 (``sense`` −1: lower is better), else ``no detectable
    difference``; ``n/a`` with fewer than 2 paired seeds."""
    if stats["n"] < 2:
        return "n/a (needs >= 2 paired seeds)"
    if stats["lo"] > 0 or stats["hi"] < 0:
        return "better" if (stats["lo"] > 0) == (sense > 0) else "worse"
    return "no detectable difference"


def summarize(rows: list[dict], variants: list[str], baseline: str) -> dict:
    """Per-variant statistics over the ``ok`` runs, and paired differences to the baseline.

    Returns:
        ``{"variants": {name: {"n", "runs", "failed", "params", "gflops", metric: (mean, std)}}, "diffs": {name:
        {metric: paired_difference(...) + {"verdict"}}}}``; std is NaN for n < 2.
    """
    ok = {v: {r["seed"]: r for r in rows if r["variant"] == v and r["status"] == "ok"} for v in variants}
    out = {"variants": {}, "diffs": {}}
    for v in variants:
        runs = list(ok[v].values())
        s = {"n": len(runs), "runs": sum(r["variant"] == v for r in rows),
             "failed": sum(r["variant"] == v and r["status"] != "ok" for r in rows)}  # fmt: skip
        for key in ("params", "gflops"):
            s[key] = next((r[key] for r in rows if r["variant"] == v and r[key] is not None), None)
        for key, *_ in METRICS:
            vals = [r[key] for r in runs if r[key] is not None]
            mean = statistics.fmean(vals) if vals else math.nan
            s[key] = (mean, statistics.stdev(vals) if len(vals) > 1 else math.nan)
        out["variants"][v] = s
        if v != baseline:
            seeds = sorted(set(ok[v]) & set(ok[baseline]))
            out["diffs"][v] = {}
            for key, _, _, sense in METRICS:
                if sense == 0:
                    continue
                pairs = [(ok[v][k][key], ok[baseline][k][key]) for k in seeds]
                d = paired_difference([a - b for a, b in pairs if a is not None and b is not None])
                out["diffs"][v][key] = {**d, "verdict": verdict(d, sense)}
    return out


def _fmt(x, dec: int, sign: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.{dec}f}" if sign else f"{x:.{dec}f}"


def _duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def summary_markdown(ab: Ablation, rows: list[dict], stats: dict, wall_s: float | None = None) -> str:
    """The summary.md text: setup, verdicts, per-variant table (mean ± std), paired differences, failures."""
    names = [v.name for v in ab.variants]
    tr = ", ".join(f"{k}={v}" for k, v in ab.train.items())
    n_ok = sum(r["status"] == "ok" for r in rows)
    lines = [
        f"# Ablation `{ab.name}`",
        "",
        f"- data: `{ab.data}` ({ab.nc} classes); seeds: {', '.join(map(str, ab.seeds))}; baseline: `{ab.baseline}`",
        f"- train: {tr or 'Ultralytics defaults'}; GFLOPs and latency at imgsz {ab.imgsz}",
        f"- runs: {n_ok} ok, {len(rows) - n_ok} failed, {len(names) * len(ab.seeds) - len(rows)} not run"
        + (f"; wall time {_duration(wall_s)} (this invocation)" if wall_s is not None else "")
        + f"; training time, sum over runs: {_duration(sum(r['train_time_s'] or 0 for r in rows))}",
        "",
        f"## Verdict: mAP50-95 vs `{ab.baseline}`",
        "",
    ]
    for v in names:
        if v == ab.baseline:
            continue
        d = stats["diffs"][v][PRIMARY]
        b, s = stats["variants"][ab.baseline], stats["variants"][v]
        if d["n"] < 2:
            mean = f" (Δ {_fmt(d['mean'], 4, True)} from 1 seed)" if d["n"] == 1 else ""
            lines.append(f"- **{v}**: **n/a**: {d['n']} seed(s) with ok runs of both, needs >= 2{mean}")
            continue
        cost = []
        if b["params"] and s["params"]:
            cost.append(f"params {100 * (s['params'] / b['params'] - 1):+.2f}%")
        if b["gflops"] and s["gflops"]:
            cost.append(f"GFLOPs {100 * (s['gflops'] / b['gflops'] - 1):+.2f}%")
        if not math.isnan(b["latency_ms"][0]) and not math.isnan(s["latency_ms"][0]):
            cost.append(f"latency {s['latency_ms'][0] - b['latency_ms'][0]:+.2f} ms")
        lines.append(
            f"- **{v}**: **{d['verdict']}** (Δ {_fmt(d['mean'], 4, True)}, {int(CONFIDENCE * 100)}% CI "
            f"[{_fmt(d['lo'], 4, True)}, {_fmt(d['hi'], 4, True)}], p = {_fmt(d['p'], 3)}, n = {d['n']} paired seeds)"
            + (f"; cost: {', '.join(cost)}" if cost else "")
        )
    head = ["variant", "ok runs", "params (M)", "GFLOPs"] + [label for _, label, _, _ in METRICS]
    lines += ["", "## Results (mean ± std over seeds)", "", "| " + " | ".join(head) + " |",
              "|" + "---|" * len(head)]  # fmt: skip
    for v in names:
        s = stats["variants"][v]
        cells = [f"{v}{' (baseline)' if v == ab.baseline else ''}", f"{s['n']}/{len(ab.seeds)}",
                 _fmt(s["params"] / 1e6 if s["params"] else None, 3), _fmt(s["gflops"], 3)]  # fmt: skip
        for key, _, dec, _ in METRICS:
            mean, sd = s[key]
            cells.append(_fmt(mean, dec) + ("" if math.isnan(sd) else f" ± {_fmt(sd, dec)}"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"## Difference to `{ab.baseline}` (paired by seed; {int(CONFIDENCE * 100)}% CI from the t distribution, "
        "two-sided paired t-test)",
        "",
        "| variant | metric | Δ mean | 95% CI | p | n | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in names:
        if v == ab.baseline:
            continue
        for key, label, dec, _ in METRICS:
            if key not in stats["diffs"][v]:
                continue
            d = stats["diffs"][v][key]
            if d["n"] == 0:
                continue
            ci = "n/a" if math.isnan(d["lo"]) else f"[{_fmt(d['lo'], dec, True)}, {_fmt(d['hi'], dec, True)}]"
            lines.append(f"| {v} | {label} | {_fmt(d['mean'], dec, True)} | {ci} | {_fmt(d['p'], 3)} | {d['n']} | "
                         f"{d['verdict']} |")
    lines += ["", "Verdict: the CI excludes 0 → better/worse (latency: lower is better); otherwise no detectable "
              "difference. Δ = variant − baseline, per seed. Latency: median batch-1 forward of best.pt "
              "(fused, fp32)."]
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        lines += ["", "## Failed runs", "", "| variant | seed | error | run folder |", "|---|---|---|---|"]
        lines += [f"| {r['variant']} | {r['seed']} | {r['error'].replace('|', '/')} | `{r['run_dir']}` |"
                  for r in failed]
    lines += ["", "Plots: `ablation.png` (mAP50-95 vs GFLOPs), `curves.png` (validation mAP per epoch); every run: "
              "`results.csv`.", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------- plots


def plot_ablation(path: Path, stats: dict, names: list[str], baseline: str, imgsz: int) -> None:
    """mAP50-95 (mean ± std over seeds) against GFLOPs, one point per variant."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5), dpi=120)
    ax = fig.subplots()
    if stats["variants"][baseline]["n"]:
        ax.axhline(stats["variants"][baseline][PRIMARY][0], color="C0", ls="--", lw=0.8, alpha=0.6)
    for i, v in enumerate(names):
        s = stats["variants"][v]
        mean, sd = s[PRIMARY]
        if s["n"] == 0 or s["gflops"] is None:
            continue
        ax.errorbar(s["gflops"], mean, yerr=0 if math.isnan(sd) else sd, fmt="s" if v == baseline else "o",
                    ms=8, capsize=5, color=f"C{i % 10}", label=f"{v} (n={s['n']})")
        ax.annotate(v, (s["gflops"], mean), textcoords="offset points", xytext=(7, 7 + 10 * (i % 3)), fontsize=9)
    ax.set_xlabel(f"GFLOPs at imgsz {imgsz}")
    ax.set_ylabel("mAP50-95 (val), mean ± std over seeds")
    ax.set_title("Ablation: accuracy vs cost")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.margins(x=0.15, y=0.15)
    fig.tight_layout()
    fig.savefig(path)


def plot_curves(path: Path, rows: list[dict], names: list[str]) -> None:
    """Validation mAP50 and mAP50-95 per epoch: every seed thin, the mean over seeds thick, one colour per variant."""
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(12, 4.5), dpi=120)
    axes = fig.subplots(1, 2)
    for ax, (col, label) in zip(axes, (("metrics/mAP50(B)", "mAP50"), ("metrics/mAP50-95(B)", "mAP50-95"))):
        for i, v in enumerate(names):
            curves = []
            for r in rows:
                if r["variant"] == v and r["status"] == "ok":
                    t = _epoch_table(Path(r["run_dir"]) / "results.csv")
                    if t.get(col):
                        curves.append(np.array(t[col]))
                        ax.plot(t["epoch"], t[col], ".-", color=f"C{i % 10}", lw=0.8, ms=3, alpha=0.35)
            if curves:
                n = max(map(len, curves))
                m = np.array([np.nanmean([c[e] for c in curves if len(c) > e]) for e in range(n)])
                ax.plot(np.arange(1, n + 1), m, "o-", color=f"C{i % 10}", lw=2.2, ms=4,
                        label=f"{v} (mean of {len(curves)})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"{label} (val)")
        ax.set_title(f"Validation {label} per epoch")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def write_report(ab: Ablation, rows: list[dict], wall_s: float | None = None) -> str:
    """Write summary.md, ablation.png and curves.png from the planned runs' rows; returns the summary text."""
    names = [v.name for v in ab.variants]
    stats = summarize(rows, names, ab.baseline)
    text = summary_markdown(ab, rows, stats, wall_s)
    (ab.out / "summary.md").write_text(text)
    if any(r["status"] == "ok" for r in rows):
        plot_ablation(ab.out / "ablation.png", stats, names, ab.baseline, ab.imgsz)
        plot_curves(ab.out / "curves.png", rows, names)
    return text


# ---------------------------------------------------------------------------------------------------------- runner


def _schedule(specs: list[RunSpec], devices: list, runner, on_start, on_done) -> None:
    """Run ``specs``: in this process when there is at most one device, else one worker process per device, each
    running one run at a time. ``on_start(spec, device)`` and ``on_done(row)`` are called in order per run."""
    if len(devices) <= 1:
        device = devices[0] if devices else None
        for spec in specs:
            on_start(spec, device)
            on_done(runner(spec, device))
        return

    import multiprocessing
    import queue
    import threading
    from concurrent.futures import ProcessPoolExecutor

    todo: queue.Queue = queue.Queue()
    for spec in specs:
        todo.put(spec)
    lock, stop = threading.Lock(), threading.Event()
    ctx = multiprocessing.get_context("spawn")  # CUDA-safe; each worker selects its own device
    pools = [ProcessPoolExecutor(1, mp_context=ctx) for _ in devices]

    def work(k: int, device: str) -> None:
        while not stop.is_set():
            try:
                spec = todo.get_nowait()
            except queue.Empty:
                return
            with lock:
                on_start(spec, device)
            try:
                row = pools[k].submit(runner, spec, device).result()
            except Exception as e:  # the worker process died (killed, segfault): record and replace it
                row = {"variant": spec.variant, "seed": spec.seed, "status": "failed", "params": spec.params,
                       "gflops": spec.gflops, "device": device, "run_dir": spec.run_dir, "model": spec.model,
                       "error": f"worker process failed: {_first_line(e)}", "fingerprint": spec.fingerprint}
                pools[k].shutdown(wait=False, cancel_futures=True)
                pools[k] = ProcessPoolExecutor(1, mp_context=ctx)
            except BaseException:  # Ctrl-C reached the worker
                stop.set()
                return
            with lock:
                on_done(row)

    threads = [threading.Thread(target=work, args=(k, d), daemon=True) for k, d in enumerate(devices)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        for p in pools:
            p.shutdown(wait=False, cancel_futures=True)


def run_ablation(ab: Ablation, runner=execute_run, started: float | None = None) -> int:
    """Run every unfinished run of ``ab``, recording each in results.csv as it ends, then write the report.

    Args:
        ab: validated ablation (``validate``).
        runner: ``runner(spec, device) -> row``; ``execute_run`` (replaceable for tests).
        started: ``time.perf_counter()`` when the command started (for the wall time in the summary).

    Returns:
        Exit code: 0 all runs ok, 1 some run failed, 130 interrupted (Ctrl-C).
    """
    t_start = time.perf_counter() if started is None else started
    ab.out.mkdir(parents=True, exist_ok=True)
    (ab.out / "config.yaml").write_text(yaml.safe_dump(ab.config, sort_keys=False))
    data = prepare_data(ab)
    specs = plan(ab, data)
    csv_path = ab.out / "results.csv"
    rows = {(r["variant"], r["seed"]): r for r in read_results(csv_path)}
    planned = {(s.variant, s.seed): s for s in specs}
    extra = [k for k in rows if k not in planned]
    if extra:
        print(f"attn-yolo ablate: {len(extra)} row(s) of results.csv are not in this config (kept, not summarised)")
    changed = [k for k, s in planned.items() if k in rows and rows[k]["fingerprint"] != s.fingerprint]
    if changed:
        print(f"attn-yolo ablate: {len(changed)} run(s) in results.csv used other settings (model, data, train args) "
              "and are redone; use another out= to keep both")
    todo = [s for s in specs
            if rows.get((s.variant, s.seed), {}).get("status") != "ok" or (s.variant, s.seed) in changed]
    done_before = len(specs) - len(todo)
    if done_before:
        print(f"attn-yolo ablate: {done_before}/{len(specs)} run(s) already finished in {csv_path}; skipping them")
    durations, begun = [], {}
    n_workers = max(1, len(ab.devices))

    def ordered_rows() -> list[dict]:
        return [rows[k] for k in planned if k in rows] + [rows[k] for k in rows if k not in planned]

    def on_start(spec: RunSpec, device) -> None:
        k = done_before + len(begun) + 1
        begun[(spec.variant, spec.seed)] = time.perf_counter()
        left = len(todo) - len(durations)
        eta = _duration(statistics.fmean(durations) * left / n_workers) if durations else "after the first run"
        dev = f" device={device}" if device is not None else ""
        print(f"\n[run {k}/{len(specs)}] variant={spec.variant} seed={spec.seed}{dev} — ETA {eta}", flush=True)

    def on_done(row: dict) -> None:
        key = (row["variant"], row["seed"])
        durations.append(time.perf_counter() - begun.get(key, time.perf_counter()))
        rows[key] = row
        write_results(csv_path, ordered_rows())
        msg = f"mAP50-95 {row['map50_95']:.4f}" if row["status"] == "ok" else f"FAILED: {row['error']}"
        print(f"[done] variant={row['variant']} seed={row['seed']}: {msg}", flush=True)

    code = 0
    try:
        _schedule(todo, ab.devices, runner, on_start, on_done)
    except KeyboardInterrupt:
        code = 130
        print(f"\nattn-yolo ablate: interrupted; {len(durations)} run(s) of this session recorded in {csv_path}. "
              "Run the same command again to continue.", file=sys.stderr, flush=True)
    rows = {(r["variant"], r["seed"]): r for r in read_results(csv_path)}  # the report reads what results.csv holds
    current = [rows[k] for k, s in planned.items() if k in rows and rows[k]["fingerprint"] == s.fingerprint]
    text = write_report(ab, current, time.perf_counter() - t_start)
    print("\n" + text)
    print(f"attn-yolo ablate: results in {ab.out} (results.csv, summary.md, ablation.png, curves.png)")
    if code == 0 and any(r["status"] != "ok" for r in current):
        code = 1
    return code


def run(config: str | Path | None = None, overrides: list[str] = (), runner=execute_run) -> int:
    """Load, override, validate (every problem at once, before any training) and run an ablation config."""
    started = time.perf_counter()
    raw, base, name, source = load_config(config)
    ab = validate(apply_overrides(raw, list(overrides)), base, name, source)
    return run_ablation(ab, runner=runner, started=started)


def main(argv: list[str]) -> int:
    """``attn-yolo ablate [config.yaml] [key=value ...]``; no config runs the embedded synthetic-quick ablation."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(__doc__)
        return 0
    config = None
    if argv and "=" not in argv[0]:
        config, argv = argv[0], argv[1:]
    return run(config, argv)
