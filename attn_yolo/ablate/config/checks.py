"""One check per config key: the value resolved and each problem named by its key; nothing built or written."""

from __future__ import annotations

import hashlib
from pathlib import Path

from attn_yolo import ultralytics_api as api
from attn_yolo.ablate.config.ablation import RUNNER_TRAIN_KEYS, SYNTHETIC, first_line
from attn_yolo.args import batch_problem, imgsz_problem
from attn_yolo.text import did_you_mean


def unknown_keys(keys, allowed, where: str) -> list[str]:
    out = []
    for k in keys:
        if k not in allowed:
            out.append(f"{where}{k}: unknown key{did_you_mean(k, allowed)}; allowed: {', '.join(allowed)}")
    return out


def resolve_input(value: str, base: Path) -> str:
    """A path relative to the config folder if it exists there (for a model YAML: also its scale-less file, as
    Ultralytics resolves ``yolo11n-se.yaml`` to ``yolo11-se.yaml``), else the value as given."""
    p = (base / Path(value).expanduser()).resolve()
    unified = Path(api.unscaled_yaml_path(p))
    return str(p) if p.exists() or (p.suffix in (".yaml", ".yml") and unified.exists()) else value


def check_data(raw, base: Path) -> tuple[str | None, str, int | None, list[str]]:
    """Resolve and check the dataset; returns (data yaml, its fingerprint, nc, problems).

    ``synthetic`` and the generator's other settings (``synthetic-key``, ...; ``attn_yolo.synthetic.SETTINGS``) are not
    generated here (``attn_yolo.ablate.runs.prepare`` does, in the run): its data YAML is where the
    generator writes it, its fingerprint the generator's cache key, its classes ``synthetic.CLASS_NAMES``. Any other
    dataset YAML is read by Ultralytics' ``check_det_dataset`` (no download: ``autodownload=False``).
    """
    from ultralytics.data.utils import check_det_dataset

    if raw is None:
        return None, "", None, ["data: missing; an Ultralytics dataset YAML or `synthetic`"]
    if not isinstance(raw, str) or not raw.strip():
        return None, "", None, [f"data: {raw!r}; expected a dataset YAML path or a setting name such as `synthetic`"]
    path = resolve_input(raw, base)
    if raw.startswith(SYNTHETIC) and not Path(path).exists():  # a named setting of the embedded generator
        from attn_yolo import synthetic

        try:
            root = synthetic.default_root(raw).expanduser().resolve()
        except ValueError as e:
            return None, "", None, [f"data: {e} (attn_yolo.synthetic's settings), or a dataset YAML"]
        return str(root / "data.yaml"), f"{raw}:{root.name}", len(synthetic.CLASS_NAMES), []
    try:
        info = check_det_dataset(path, autodownload=False)
    except Exception as e:
        return None, "", None, [f"data: {raw!r} does not resolve to a usable dataset: {first_line(e)}"]
    p = Path(path)
    data_id = hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.is_file() else path
    return str(p.resolve()) if p.is_file() else path, f"{raw}:{data_id}", int(info["nc"]), []


def check_train(raw, base: Path, has_devices: bool) -> tuple[dict, list[str]]:
    from ultralytics.cfg import DEFAULT_CFG_DICT, check_cfg
    from ultralytics.utils.downloads import GITHUB_ASSETS_NAMES, attempt_download_asset

    if raw is None:
        return {}, []
    if not isinstance(raw, dict):
        return {}, [f"train: {raw!r}; expected a mapping of Ultralytics train arguments"]
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
            problems.append(f"train.{k}: unknown Ultralytics train argument{did_you_mean(k, DEFAULT_CFG_DICT)}")
            continue
        one = {k: v}
        try:
            check_cfg(one)
        except (TypeError, ValueError, SyntaxError) as e:
            problems.append(f"train.{k}: {first_line(e)}")
            continue
        train[k] = one[k]
    if train.get("batch") is not None and (why := batch_problem(train["batch"])):  # values Ultralytics misreads
        problems.append(f"train.batch: {train['batch']!r}; expected {why}")
    if "device" in train and has_devices:
        problems.append("train.device: not with `devices` (each run gets one of `devices`); remove one of them")
    elif train.get("device") is not None:  # device=0,1 / cpu: checked as `devices` is, before any run
        dev = train["device"]
        parts = [x.strip() for x in dev.split(",") if x.strip()] if isinstance(dev, str) else [dev]
        problems += check_devices(parts, "train.device")[1]
    imgsz = train.get("imgsz", DEFAULT_CFG_DICT["imgsz"])
    if why := imgsz_problem(imgsz):
        problems.append(f"train.imgsz: {imgsz!r}; expected {why} (square training size)")
    pre = train.get("pretrained")
    if isinstance(pre, str):
        path = resolve_input(pre, base)
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


def check_devices(raw, key: str = "devices") -> tuple[list, list[str]]:
    """The devices as strings and a problem per bad one, named ``<key>[i]`` (``key`` alone for ``train.device``,
    Ultralytics' ``0,1`` already split)."""
    if raw is None:
        return [], []
    devices = raw if isinstance(raw, list) else [raw]
    problems = []
    import torch

    n_cuda = torch.cuda.device_count()
    for i, d in enumerate(devices):
        name = f"{key}[{i}]" if key == "devices" else key
        if isinstance(d, bool) or not isinstance(d, (int, str)):
            problems.append(f"{name}: {d!r}; expected a CUDA index, 'cpu', 'mps' or 'cuda:N'")
            continue
        s = str(d).lower().removeprefix("cuda:")
        if s.isdigit() and int(s) >= n_cuda:
            problems.append(f"{name}: CUDA device {s} not available ({n_cuda} CUDA device(s) found)")
        elif not s.isdigit() and s not in ("cpu", "mps"):
            problems.append(f"{name}: {d!r}; expected a CUDA index, 'cpu', 'mps' or 'cuda:N'")
    return [str(d) for d in devices], problems


def check_backend(raw: dict, shape: dict, devices: list, train: dict) -> tuple[str | None, list[str]]:
    """``ray_address`` and how ``backend`` and ``resources`` (``shape``: ``config.SHAPE.check``'s values) go with
    the devices; returns (address, problems)."""
    backend, address, resources = shape["backend"], raw.get("ray_address"), shape["resources"]
    problems = []
    if address is not None and (not isinstance(address, str) or not address):
        problems.append(f"ray_address: {address!r}; expected auto, ray://host:port or host:port")
    if backend != "ray":
        if address is not None:
            problems.append("ray_address: only with backend=ray")
        return address, problems
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        problems.append("backend: ray is not installed; pip install 'attn-yolo[ray]'")
    if devices:
        problems.append("devices: not with backend=ray (Ray places each run; set resources.num_gpus)")
    dev = str(train.get("device", "cpu")).lower()
    if dev != "cpu" or ("device" in train and resources["num_gpus"]):
        problems.append(f"train.device: {train['device']!r} not with backend=ray; runs get their device from "
                        "resources.num_gpus (0: cpu)")
    return address, problems


def check_int_list(raw, key: str, default: list[int]) -> tuple[list[int], list[str]]:
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
