"""Ablation config: the embedded default, loading, command-line overrides, and validation before any training."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import re
import tempfile
from pathlib import Path

import yaml

from attn_yolo import ultralytics_api as api
from attn_yolo.ablate import design
from attn_yolo.args import UsageError
from attn_yolo.checkpoint import check_writable, load_model

# The default ablation (`attn-yolo ablate` without a config). configs/ablation/synthetic-quick.yaml is this text.
DEFAULT_CONFIG_NAME = "synthetic-quick"
DEFAULT_CONFIG_YAML = """\
# Quick default ablation: does CBAM (channel + spatial attention) help yolo11n on the synthetic-shapes dataset?
# `attn-yolo ablate` (no config) runs exactly this; it is embedded in attn_yolo/ablate/config.py, so it also works
# outside the repository. Design: warm start. yolo11n is trained once (5 epochs, the shared start in out/start/, reused
# by reruns); then every arm, the baseline (the start itself) and + CBAM (inserted at the identity, every weight
# carried by layer), is fine-tuned from it for 1 epoch on half the training images, paired seed by paired seed, until
# the stopping rule decides (3 to 5 seeds). Budget: about 10 minutes on 2 CPU cores.
data: synthetic  # attn_yolo.synthetic: 4 shape classes on cluttered backgrounds, generated on first use (no download)
variants:
  - {name: baseline, model: yolo11n.yaml}
  - {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone, args: [16, 7]}  # CBAM after backbone P3/P4/P5
start:  # the shared start: trained with `train` below, these keys replacing its own (= QUICK_TRAIN_ARGS, 5 epochs)
  epochs: 5
  fraction: 1.0
  lr0: 0.003
  warmup_epochs: 0.3
  val: false
seeds: {min: 3, max: 5}  # paired seeds chosen by the data (anytime-valid stopping rule; a list is a fixed design)
train:  # Ultralytics train arguments of every arm: fine-tuning from the start
  epochs: 1
  fraction: 0.5
  imgsz: 128
  batch: 8
  nbs: 8
  optimizer: AdamW
  lr0: 0.0005  # a fine-tuning rate, and no warmup: warmup_bias_lr (0.1) would first undo the start's head
  warmup_epochs: 0
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

CONFIG_KEYS = ("data", "variants", "seeds", "train", "out", "latency", "devices", "copy_data", "trust", "backend",
               "ray_address", "resources", "bootstrap", "health", "start", "reference", "placebo")
BACKENDS = ("local", "ray")
RESOURCE_DEFAULTS = {"num_cpus": 1, "num_gpus": 0}  # Ray resources per run (backend: ray)
MODEL_VARIANT_KEYS = ("name", "model", "baseline")
INSERT_VARIANT_KEYS = ("name", "base", "module", "at", "args", "baseline")
LATENCY_DEFAULTS = {"repeats": 50, "warmup": 10}

def _int_in(lo: int, hi: int | None = None):
    """A rule of ``_check_numbers``: an int in ``lo..hi`` (``>= lo`` without ``hi``)."""
    return (lambda v: isinstance(v, int) and lo <= v <= (hi if hi is not None else v),
            f"an int in {lo}..{hi}" if hi is not None else f"an int >= {lo}")


def _number(more_than_zero: bool):
    """A rule of ``_check_numbers``: a number > 0, or >= 0."""
    return ((lambda v: isinstance(v, (int, float)) and (v > 0 if more_than_zero else v >= 0)),
            f"a number {'> 0' if more_than_zero else '>= 0'}")


LATENCY_RULES = {"repeats": _int_in(1, 10000), "warmup": _int_in(0, 1000)}  # forwards per model; more only costs time
RESOURCE_RULES = {"num_cpus": _number(True), "num_gpus": _number(False)}
BOOTSTRAP_DEFAULTS = {"resamples": 2000, "seed": 0}  # image resamples of the per-image bootstrap, and their seed
BOOTSTRAP_RULES = {"resamples": _int_in(100, 100_000), "seed": _int_in(0)}
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
SYNTHETIC = "synthetic"  # `data:` keyword for the embedded dataset


class ConfigError(UsageError):
    """The ablation config has problems; ``problems`` lists every one as ``"<config key>: <message>"``."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        if len(self.problems) == 1:  # one line
            super().__init__(f"{source}: {self.problems[0]}")
        else:
            super().__init__(f"{source}: {len(self.problems)} problems in the ablation config:\n{lines}")


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
    trust: bool = False  # load train.pretrained by a full unpickle (may run code it contains); else weights-only
    backend: str = "local"  # local (this host: sequential or `devices`) | ray (one Ray task per run)
    ray_address: str | None = None  # None: a local Ray instance started and stopped by the run; `auto`, ray://...
    resources: dict = dataclasses.field(default_factory=lambda: dict(RESOURCE_DEFAULTS))  # per Ray task
    bootstrap: dict = dataclasses.field(default_factory=lambda: dict(BOOTSTRAP_DEFAULTS))
    health: bool = True  # attention health per run (attn_yolo.health); `health: false` turns it off
    start: object = None  # design.Start every arm starts from; None: every arm from scratch
    seed_rule: object = None  # sequential.SeedRule: seeds chosen by the data; None: the fixed list `seeds`
    reference: str | None = None  # the reference arm (the yardstick), one of `variants`
    placebos: dict = dataclasses.field(default_factory=dict)  # placebo arm -> the variant it controls
    arm_starts: dict = dataclasses.field(default_factory=dict)  # arm -> design.Start of its own (a reference)


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


def _block_name(module) -> str | None:
    """The block a variant's ``module`` names (or the blocks of a list, joined by ``,``): its YAML name or an alias
    (``attn_yolo.registry.ALIASES``), as ``attn-yolo insert`` accepts it (case-insensitive); None if it names no
    block."""
    from attn_yolo.insertion import InsertionError, module_class

    try:
        return ",".join(module_class(m)[0] for m in (module if isinstance(module, list) and module else [module]))
    except InsertionError:
        return None


def _resolve_input(value: str, base: Path) -> str:
    """A path relative to the config folder if it exists there (for a model YAML: also its scale-less file, as
    Ultralytics resolves ``yolo11n-se.yaml`` to ``yolo11-se.yaml``), else the value as given."""
    p = (base / Path(value).expanduser()).resolve()
    unified = Path(api.unscaled_yaml_path(p))
    return str(p) if p.exists() or (p.suffix in (".yaml", ".yml") and unified.exists()) else value


def first_line(e: BaseException, limit: int = 400) -> str:
    """An error as one line for a config problem or a failed run's record: ``"<type>: <message>"``, ``limit`` chars."""
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
    raw_variants, base: Path, nc: int | None, imgsz: int, pretrained: dict | None = None, what: str = "train.pretrained"
) -> tuple[list[Variant], str | None, list]:
    """Validate and build every variant; returns (variants, baseline name, problems).

    With ``pretrained`` (the model dict of ``train.pretrained``), each variant must be that model, or that model with
    attention blocks inserted, so that ``attn_yolo.transfer`` can carry every weight to its layer.
    """
    import torch
    from ultralytics.nn.tasks import DetectionModel, guess_model_task, yaml_model_load
    from ultralytics.utils.torch_utils import get_flops, get_num_params

    from attn_yolo.insertion import InsertionError, insert_dict, layer_map
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
                elif not _block_name(v["module"]):
                    close = difflib.get_close_matches(str(v["module"]), list(MODULES), n=1, cutoff=0.5)
                    hint = f" (did you mean {close[0]}?)" if close else ""
                    problems.append(
                        f"{key}.module: unknown module {v['module']!r}{hint}; one of {', '.join(MODULES)} or an alias "
                        "(`attn-yolo modules`)"
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
                    d = insert_dict(base=base_model, **spec)
                    path = Path(tmp) / insert_file_name(base_model, name)
                    path.write_text(yaml.safe_dump(d, sort_keys=False))
                    model, model_dict = path.name, d
                else:
                    model, model_dict = _resolve_input(v["model"], base), None
                    path = model
                d = yaml_model_load(path)
                if (task := guess_model_task(d)) != "detect":
                    where = "" if is_insert else ".model"
                    problems.append(f"{key}{where}: is a {task} model; ablations train detect models")
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
                problems.append(f"{key}{where}: does not build: {first_line(e)}")
                continue
            if pretrained is not None:
                try:
                    design.check_same_scale(pretrained, d)
                    layer_map(pretrained, d)
                except InsertionError as e:
                    problems.append(f"{key}: is not the {what} model (with attention blocks inserted), so its weights "
                                    f"cannot be carried over: {first_line(e)}")
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
        return None, "", None, [f"data: {raw!r} does not resolve to a usable dataset: {first_line(e)}"]
    p = Path(path)
    data_id = hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.is_file() else path
    return str(p.resolve()) if p.is_file() else path, f"{raw}:{data_id}", int(info["nc"]), []


def _check_batch(train: dict) -> list[str]:
    """``batch`` beyond Ultralytics' type checks: values it would take silently but misread.

    batch: a positive int, or auto batch (``ultralytics.utils.autobatch.check_train_batch_size``): -1 at 60% of the
    GPU memory, a float in (0, 1) at that fraction of it; any other value < 1 also starts auto batch at 60%.
    (``fraction`` needs no check here: Ultralytics' own ``check_cfg`` refuses what it cannot read.)
    """
    problems = []
    b = train.get("batch")
    if b is not None and not (
        (isinstance(b, int) and not isinstance(b, bool) and (b >= 1 or b == -1)) or (isinstance(b, float) and 0 < b < 1)
    ):
        problems.append(f"train.batch: {b!r}; expected a positive int, -1 (auto batch at 60% of GPU memory) or a float "
                        "in (0, 1) (auto batch at that fraction of GPU memory)")
    return problems


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
        if k == "sdpa":  # attn-yolo's own key: Ultralytics' Attention/AAttn on fused SDPA (attn_yolo.sdpa)
            if not isinstance(v, bool):
                problems.append(f"train.sdpa: {v!r}; expected true or false (true: Ultralytics' attention on SDPA)")
            train[k] = v
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
            problems.append(f"train.{k}: {first_line(e)}")
            continue
        train[k] = one[k]
    problems += _check_batch(train)
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


def _check_numbers(value, key: str, defaults: dict, rules: dict) -> tuple[dict, list[str]]:
    """A mapping of numbers such as ``latency: {repeats: 50, warmup: 10}``: ``defaults`` updated with its valid values,
    and a problem for an unknown key and for each value that breaks its rule (``rules``: key -> (test, allowed))."""
    out, problems = dict(defaults), []
    if value is not None and not isinstance(value, dict):
        problems.append(f"{key}: expected a mapping with keys {', '.join(defaults)}, got {value!r}")
    elif value:
        problems += _unknown(value, defaults, f"{key}.")
        for k, (ok, allowed) in rules.items():
            v = value.get(k, out[k])
            if isinstance(v, bool) or not ok(v):
                problems.append(f"{key}.{k}: {v!r}; expected {allowed}")
            else:
                out[k] = v
    return out, problems


def _check_backend(raw: dict, devices: list, train: dict) -> tuple[str, str | None, dict, list[str]]:
    """``backend``, ``ray_address`` and ``resources``; returns (backend, address, resources, problems)."""
    backend, address, res = raw.get("backend", "local"), raw.get("ray_address"), raw.get("resources")
    problems = []
    if backend not in BACKENDS:
        problems.append(f"backend: {backend!r}; expected one of {', '.join(BACKENDS)}")
    if address is not None and (not isinstance(address, str) or not address):
        problems.append(f"ray_address: {address!r}; expected auto, ray://host:port or host:port")
    resources, p = _check_numbers(res, "resources", RESOURCE_DEFAULTS, RESOURCE_RULES)
    problems += p
    if backend != "ray":
        if address is not None:
            problems.append("ray_address: only with backend=ray")
        return backend, address, resources, problems
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        problems.append("backend: ray is not installed; pip install 'attn-yolo[ray]'")
    if devices:
        problems.append("devices: not with backend=ray (Ray places each run; set resources.num_gpus)")
    dev = str(train.get("device", "cpu")).lower()
    if dev != "cpu" or ("device" in train and resources["num_gpus"]):
        problems.append(f"train.device: {train['device']!r} not with backend=ray; runs get their device from "
                        "resources.num_gpus (0: cpu)")
    return backend, address, resources, problems


def _check_int_list(raw, key: str, default: list[int]) -> tuple[list[int], list[str]]:
    if raw is None:
        return default, []
    if not isinstance(raw, list):  # `seeds: 3` is not three seeds: say which edit means what
        n = raw if isinstance(raw, int) and not isinstance(raw, bool) and 0 < raw <= 100 else 3
        return [], [f"{key}: {raw!r}; expected a list of ints, e.g. {key}: {list(range(n))} for {n} seed"
                    f"{'s' if n > 1 else ''}" + (f", or {key}: [{raw}] for seed {raw} alone" if n == raw else "")]
    bad = [v for v in raw if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if not raw or bad:
        return [], [f"{key}: {raw!r}; expected a non-empty list of non-negative ints"]
    if len(set(raw)) != len(raw):
        return [], [f"{key}: {raw!r}; has duplicates"]
    return list(raw), []


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
    backend, ray_address, resources, p = _check_backend(raw, devices, train)
    problems += p
    imgsz = train.get("imgsz", DEFAULT_CFG_DICT["imgsz"])
    imgsz = imgsz if isinstance(imgsz, int) and imgsz >= 32 else 640
    if "imgsz" in train:  # Ultralytics' rule (check_imgsz, one warning): a multiple of the max stride, 32
        from ultralytics.utils.checks import check_imgsz

        imgsz = train["imgsz"] = check_imgsz(imgsz, stride=32)
    seed_rule = None
    if isinstance(raw.get("seeds"), dict):
        seeds, seed_rule, p = design.check_seed_rule(raw["seeds"])
    else:
        seeds, p = _check_int_list(raw.get("seeds"), "seeds", [0])
    problems += p
    if (len(seeds) > 1 or seed_rule is not None) and (why := design.loader_seed_problem()):
        problems.append(f"seeds: {why}")
    latency, p = _check_numbers(raw.get("latency"), "latency", LATENCY_DEFAULTS, LATENCY_RULES)
    problems += p
    bootstrap, p = _check_numbers(raw.get("bootstrap"), "bootstrap", BOOTSTRAP_DEFAULTS, BOOTSTRAP_RULES)
    problems += p
    out = raw.get("out", f"runs/ablate/{name}")
    if not isinstance(out, str) or not out:
        problems.append(f"out: expected a folder path, got {out!r}")
        out = f"runs/ablate/{name}"
    elif Path(out).exists() and not Path(out).is_dir():
        problems.append(f"out: {out!r} is an existing file; expected a folder (new, or an earlier run's to resume)")
    else:
        try:
            check_writable(out, "out", UsageError)
        except UsageError as e:
            problems.append(str(e).replace("out=", "out: ", 1))
    trust = raw.get("trust", False)
    if not isinstance(trust, bool):
        problems.append(f"trust: {trust!r}; expected true or false (true: load train.pretrained by a full unpickle)")
    health = raw.get("health", True)
    if not isinstance(health, bool):
        problems.append(f"health: {health!r}; expected true or false (false: no attention health per run)")
    copy_data = raw.get("copy_data", "auto")
    if copy_data not in (True, False, "auto"):
        problems.append(f"copy_data: {copy_data!r}; expected auto, true or false")
    data, data_id, nc, p = _check_data(raw.get("data"), base)
    problems += p
    pretrained = None
    if isinstance(train.get("pretrained"), str):
        try:
            pretrained = load_model(train["pretrained"], "train.pretrained", suffixes=(".pt",), trust=trust is True)
            pretrained = pretrained.yaml
        except ValueError as e:  # load_model's messages start with "train.pretrained="
            problems.append(" ".join(str(e).split()))
    checks = design.Checks(_check_train, _check_variants, _resolve_input, _definition, first_line, load_model)
    start, p = design.check_start(raw.get("start"), "start", base, nc, train, bool(devices), trust is True,
                                  raw.get("variants"), data_id, checks)
    problems += p
    if start is not None and pretrained is not None:
        problems.append("train.pretrained: not with `start` (every arm carries the start's weights); remove one")
    variants, baseline, p = _check_variants(raw.get("variants"), base, nc, imgsz,
                                            start.model_dict if start else pretrained, "start" if start else
                                            "train.pretrained")
    problems += p
    arms, p = design.check_arms(raw, base, nc, imgsz, variants, baseline, start, trust is True, checks) if not p \
        else ({}, [])
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
        "trust": trust is True,
        "backend": backend,
        "ray_address": ray_address,
        "resources": resources,
        "bootstrap": bootstrap,
        "health": health is not False,
        "source": source,
    }
    config.update({k: raw[k] for k in ("start", "reference", "placebo") if raw.get(k) is not None})
    if seed_rule is not None:
        config["seeds"] = dataclasses.asdict(seed_rule)
    if start is not None and start.kind == "recipe":
        start.folder = str(Path(out).resolve() / "start")
    for arm, s in arms.get("starts", {}).items():
        s.folder = s.folder or str(Path(out).resolve() / f"start-{arm}")
    return Ablation(source, name, data, data_id, nc, variants + arms.get("variants", []), baseline, seeds, train,
                    imgsz, Path(out).resolve(), latency, devices, copy_data, config, trust is True, backend,
                    ray_address, resources, bootstrap, health=health is not False, start=start, seed_rule=seed_rule,
                    reference=arms.get("reference"), placebos=arms.get("placebos", {}),
                    arm_starts=arms.get("starts", {}))
