"""``validate``: a whole config checked at once before any work; cheap, nothing built, generated or written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from attn_yolo.ablate.config import design
from attn_yolo.ablate.config.ablation import CONFIG_KEYS, SHAPE, Ablation, ConfigError
from attn_yolo.ablate.config.checks import (
    check_backend,
    check_data,
    check_devices,
    check_int_list,
    check_train,
    unknown_keys,
)
from attn_yolo.ablate.config.variants import check_variants
from attn_yolo.ablate.statistics import treatment
from attn_yolo.ablate.statistics.sequential import SEED_RULE, family_problems
from attn_yolo.args import Key, Schema, UsageError, imgsz_problem
from attn_yolo.checkpoint import load_model
from attn_yolo.files import check_writable
from attn_yolo.ultralytics_api.loader import loader_seed_problem

DECLARED = Schema([
    *SHAPE,
    Key("new_blocks", "section", help="how an arm's new blocks train from the start", schema=treatment.NEW_BLOCKS),
    Key("treatment", "section", help="the attention check", schema=treatment.TREATMENT),
    Key("seeds", "section", help="the seed rule (or a list of seeds)", schema=SEED_RULE,
        words="a list of seeds, or a mapping with keys " + ", ".join(SEED_RULE.names)),
])
"""Every ablation config key declared with its type and range: ``SHAPE``'s, checked by ``Schema.check`` first, and
the sections whose checks follow it (``treatment.check_new_blocks``, ``design.check_seed_rule``, ...) reading the
same declarations."""


def own_new_blocks(raw: dict, variants: list, baseline: str | None, key: str = "variants",
                   other_models: set | frozenset = frozenset()) -> list[str]:
    """Each arm's own ``new_blocks`` (a study of how blocks train), checked and set on its ``Variant``
    (``block_training``): its keys over the config's ``new_blocks``, then the defaults; problems named by key."""
    top = raw.get("new_blocks") if isinstance(raw.get("new_blocks"), dict) else {}
    by_name, problems = {v.name: v for v in variants}, []
    for i, rv in enumerate(raw.get("variants") or []):
        if not (isinstance(rv, dict) and "new_blocks" in rv and rv.get("name") in by_name):
            continue
        where = f"variants[{i}] ({rv['name']})" if key == "variants" else key
        own = rv["new_blocks"]
        nb, q = treatment.check_new_blocks({**top, **own} if isinstance(own, dict) else own)
        problems += [f"{where}.{x}" for x in q]
        by_name[rv["name"]].block_training = nb
        if rv["name"] == baseline:
            problems.append(f"{where}.new_blocks: the baseline adds no blocks")
        elif rv["name"] in other_models:
            problems.append(f"{where}.new_blocks: the reference is another model, not the start with blocks "
                            "inserted; it has no new blocks")
    return problems


def probe_problems(new_blocks, train: dict) -> list[str]:
    """A probe phase (``new_blocks.probe_steps``) needs no warmup: Ultralytics' warmup sets every learning rate."""
    from ultralytics.cfg import DEFAULT_CFG_DICT

    warmup = train.get("warmup_epochs", DEFAULT_CFG_DICT["warmup_epochs"])
    if not new_blocks.probe_steps or not warmup:
        return []
    return [f"new_blocks.probe_steps: {new_blocks.probe_steps}; expected 0 with train.warmup_epochs {warmup!r} "
            "(warmup sets every learning rate itself: set train.warmup_epochs: 0 for a probe phase)"]


def validate(raw: dict, base: Path, name: str = "ablation", source: str = "config") -> Ablation:
    """Check a whole config before any training, every problem at once; cheap and free of side effects.

    Nothing is built, generated or written: model YAMLs and checkpoints are read, insert specs planned
    (``attn_yolo.ablate.config.variants``), a dataset YAML read by Ultralytics' ``check_det_dataset`` (``data:
    synthetic`` is not generated). ``attn_yolo.ablate.runs.prepare`` then, in the run, generates the dataset and builds
    every arm (a block hyperparameter that does not fit its layer is reported there, still before any training).

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
    problems = unknown_keys(raw, CONFIG_KEYS, "")
    shape, p = SHAPE.check({k: raw[k] for k in SHAPE.names if k in raw})  # the keys declared with their types
    problems += p
    run, p = _run_keys(raw, base, shape)
    problems += p
    seeds, seed_rule, p = _seed_keys(raw)
    problems += p
    new_blocks, p = treatment.check_new_blocks(raw.get("new_blocks"))
    problems += p + probe_problems(new_blocks, run["train"])
    judged, p = treatment.check_treatment(raw.get("treatment"))
    problems += p
    out, p = _out_key(raw.get("out", f"runs/ablate/{name}"), name)
    problems += p
    arms, p = _arm_keys(raw, base, run, shape["trust"] is True)
    problems += p
    if seed_rule is not None and not problems:
        problems += family_problems(seed_rule, len(arms["variants"]) - 1, len(arms["placebos"]))
    if problems:
        raise ConfigError(source, problems)
    return _ablation(raw, source, name, shape, run, seeds, seed_rule, new_blocks, judged, out, arms)


def _run_keys(raw: dict, base: Path, shape: dict) -> tuple[dict, list[str]]:
    """Where and how the runs train: ``devices``, ``train`` (its image size as Ultralytics rounds it; attn-yolo's own
    ``sdpa`` taken out), ``ray_address``; ``({"devices", "train", "sdpa", "ray_address"}, problems)``."""
    devices, problems = check_devices(raw.get("devices"))
    train, p = check_train(raw.get("train"), base, bool(devices))
    problems += p
    ray_address, p = check_backend(raw, shape, devices, train)
    problems += p
    side = train.get("imgsz")
    side = side[0] if isinstance(side, (list, tuple)) and len(side) == 1 else side  # [640]: one side, as Ultralytics
    if imgsz_problem(side) is None:  # Ultralytics' rule (check_imgsz, one warning): a multiple of the max stride,
        from ultralytics.utils.checks import check_imgsz  # 32; a size out of range is refused, never rounded first

        train["imgsz"] = check_imgsz(side, stride=32)
    sdpa = train.pop("sdpa", False) is True  # attn-yolo's own key (checked by check_train): held by the Ablation
    return {"devices": devices, "train": train, "sdpa": sdpa, "ray_address": ray_address}, problems


def _seed_keys(raw: dict) -> tuple[list[int], object, list[str]]:
    """``seeds``: a list, or a rule (``design.check_seed_rule``); independent replicates need a dataloader seeded
    from ``seed`` (``ultralytics_api.loader``). ``(seeds, SeedRule or None, problems)``."""
    seed_rule = None
    if isinstance(raw.get("seeds"), dict):
        seeds, seed_rule, problems = design.check_seed_rule(raw["seeds"])
    else:
        seeds, problems = check_int_list(raw.get("seeds"), "seeds", [0])
    if (len(seeds) > 1 or seed_rule is not None) and (why := loader_seed_problem()):
        problems.append(f"seeds: {why}")
    return seeds, seed_rule, problems


def _out_key(out, name: str) -> tuple[str, list[str]]:
    """``out``: a folder that is not a file and can be written; ``(out, problems)``."""
    if not isinstance(out, str) or not out:
        return f"runs/ablate/{name}", [f"out: {out!r}; expected a folder path"]
    if Path(out).exists() and not Path(out).is_dir():
        return out, [f"out: {out!r} is an existing file; expected a folder (new, or an earlier run's to resume)"]
    try:
        check_writable(out, "out", UsageError)
    except UsageError as e:
        return out, [str(e).replace("out=", "out: ", 1)]
    return out, []


def _arm_keys(raw: dict, base: Path, run: dict, trust: bool) -> tuple[dict, list[str]]:
    """What the arms are: ``data``, ``train.pretrained``, ``start``, ``variants``, the design's arms (reference,
    placebos) and each arm's own ``new_blocks``; ``({"data", "data_id", "nc", "start", "variants", "baseline",
    "reference", "placebos", "starts"}, problems)``."""
    data, data_id, nc, problems = check_data(raw.get("data"), base)
    train, pretrained = run["train"], None
    if isinstance(train.get("pretrained"), str):
        try:
            pretrained = load_model(train["pretrained"], "train.pretrained", suffixes=(".pt",), trust=trust).yaml
        except ValueError as e:  # load_model's messages start with "train.pretrained="
            problems.append(" ".join(str(e).split()))
    start, p = design.check_start(raw.get("start"), "start", base, nc, train, bool(run["devices"]), trust,
                                  raw.get("variants"), data_id)
    problems += p
    if start is not None and pretrained is not None:
        problems.append("train.pretrained: not with `start` (every arm carries the start's weights); remove one")
    variants, baseline, p = check_variants(raw.get("variants"), base, start.model_dict if start else pretrained,
                                           "start" if start else "train.pretrained")
    problems += p + own_new_blocks(raw, variants, baseline)
    if not p and len(variants) == 1:
        problems.append(f"variants: only the baseline ({baseline!r}); an ablation compares variants with it: add "
                        "one, e.g. {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone}")
    arms, p = design.check_arms(raw, base, nc, variants, baseline, start, trust) if not p else ({}, [])
    problems += p
    if arms.get("reference") and isinstance(raw.get("reference"), dict):  # the reference arm's own new_blocks
        ref = next(v for v in arms["variants"] if v.name == arms["reference"])
        problems += own_new_blocks({**raw, "variants": [{**raw["reference"], "name": ref.name}]}, [ref], None,
                                   "reference", set(arms.get("starts", {})))
    return {"data": data, "data_id": data_id, "nc": nc, "start": start, "baseline": baseline,
            "variants": variants + arms.get("variants", []), "reference": arms.get("reference"),
            "placebos": arms.get("placebos", {}), "starts": arms.get("starts", {})}, problems


def _ablation(raw, source, name, shape, run, seeds, seed_rule, new_blocks, judged, out, arms) -> Ablation:
    """The validated ``Ablation`` and the config it records (``config.yaml``), from the checked parts."""
    out = Path(out).resolve()
    trust, health = shape["trust"] is True, shape["health"] is not False
    train = run["train"]
    config = {"data": arms["data"], "variants": raw["variants"], "seeds": seeds,
              "train": {**train, "sdpa": True} if run["sdpa"] else train, "out": str(out),
              "latency": shape["latency"], "devices": run["devices"], "copy_data": shape["copy_data"], "trust": trust,
              "backend": shape["backend"], "ray_address": run["ray_address"], "resources": shape["resources"],
              "bootstrap": shape["bootstrap"], "health": health, "source": source}  # fmt: skip
    config.update({k: raw[k] for k in ("start", "reference", "placebo") if raw.get(k) is not None})
    config["new_blocks"] = dataclasses.asdict(new_blocks)
    config["treatment"] = dataclasses.asdict(judged)
    if seed_rule is not None:
        config["seeds"] = dataclasses.asdict(seed_rule)
    start = arms["start"]
    if start is not None and start.kind in ("recipe", "init"):
        start.folder = str(out / ("start" if start.kind == "recipe" else "start-init"))
    for arm, s in arms["starts"].items():
        s.folder = s.folder or str(out / f"start-{arm}")
    return Ablation(
        source=source, name=name, data=arms["data"], data_id=arms["data_id"], nc=arms["nc"],
        variants=arms["variants"], baseline=arms["baseline"], seeds=seeds, train=train, sdpa=run["sdpa"], out=out,
        latency=shape["latency"], devices=run["devices"], copy_data=shape["copy_data"], config=config, trust=trust,
        backend=shape["backend"], ray_address=run["ray_address"], resources=shape["resources"],
        bootstrap=shape["bootstrap"], health=health, start=start, seed_rule=seed_rule, reference=arms["reference"],
        placebos=arms["placebos"], arm_starts=arms["starts"], new_blocks=new_blocks, treatment=judged,
    )
