"""The starts of a warm-started ablation: a recipe trained once into out/start/ and reused by every arm.

A start has its own record and fingerprint; it is retrained only when its settings change.

A recipe start is a run like any other (``train.execute_run``: the record ``result.json`` with the start's mAP, its
``best.pt``), in a folder the runner marks as its own. It is reused while its record says ``ok`` with the same
fingerprint (model, dataset, train arguments, seed) and its ``weights/best.pt`` exists; otherwise it is trained (again)
before any arm. A reference arm of another model than the start's gets a start of its own, trained by the same recipe
(``out/start-<arm>/``). A checkpoint start needs no training.
"""

from __future__ import annotations

from pathlib import Path

from attn_yolo.ablate.config.ablation import Ablation
from attn_yolo.ablate.config.design import INIT, Start
from attn_yolo.ablate.runs.prepare import prepare
from attn_yolo.ablate.runs.records import RunSpec, read_record


def starts(ab: Ablation) -> list[Start]:
    """Every start of the ablation: the shared one, then the arms' own (a reference of another model)."""
    return [s for s in [ab.start, *ab.arm_starts.values()] if s is not None]


def arm_start(ab: Ablation, arm: str) -> Start | None:
    """The start arm ``arm`` carries its weights from (None: from scratch)."""
    return ab.arm_starts.get(arm, ab.start)


def start_spec(ab: Ablation, start: Start, data: str) -> RunSpec:
    """The run that trains a recipe start into its folder (``ab`` is prepared first where it is not yet)."""
    prepare(ab)
    base = next(v for v in ab.variants if v.name == (start.arm or ab.baseline))
    model = Path(start.model).name if start.write_model else start.model
    train = {k: v for k, v in start.train.items() if k != "sdpa"}  # a recipe's own sdpa: key, else the config's
    return RunSpec(
        variant=f"start-{start.arm}" if start.arm else "start", seed=start.seed, model=model,
        model_dict=start.model_dict if start.write_model else None, data=data, train={"imgsz": ab.imgsz, **train},
        run_dir=start.folder, params=base.params, gflops=base.gflops,
        fingerprint=start.fingerprint, trust=ab.trust, sdpa=bool(start.train.get("sdpa", ab.sdpa)),
    )  # fmt: skip


def record(start: Start) -> dict | None:
    """The record of a recipe start that can be reused as it is (ok, same settings, weights there), else None."""
    if start.kind != "recipe":
        return None
    try:
        row = read_record(start.folder)
    except ValueError:
        return None
    if row and row["status"] == "ok" and row["fingerprint"] == start.fingerprint and Path(start.weights).is_file():
        return row
    return None


def pending(ab: Ablation) -> list[Start]:
    """The recipe starts that must be trained before the arms: none yet, failed, or trained with other settings."""
    return [s for s in starts(ab) if s.kind == "recipe" and record(s) is None]


def write_inits(ab: Ablation, seeds) -> list[str]:
    """For every ``init`` start (the shared one, and a reference's own: yolo11s beside a yolo11n start), write each of
    ``seeds``' initialisation not written yet (``Start.weights_for``): the start model built after
    ``torch.manual_seed(seed)`` (the caller's RNG state kept), untrained, as an Ultralytics checkpoint
    (``checkpoint.save_checkpoint``, FP16 as Ultralytics saves) in the start's folder, which the runner marks as its
    own. Every arm of that seed that starts there carries it. Returns the files written."""
    import copy

    import torch
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.ablate.runs.outdir import RUN_MARKER, claim
    from attn_yolo.checkpoint import save_checkpoint

    written = []
    for st in [s for s in starts(ab) if s.kind == INIT]:
        if not (Path(st.folder) / RUN_MARKER).is_file():
            claim(Path(st.folder), RUN_MARKER, {"start": INIT})
        for seed in sorted(set(seeds)):
            path = Path(st.weights_for(seed))
            if path.is_file():
                continue
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                model = DetectionModel(copy.deepcopy(st.model_dict), nc=ab.nc, verbose=False)
            save_checkpoint(model, path, overwrite=True, note=f"attn-yolo ablate: start {INIT}, seed {seed}, "
                            "untrained")
            written.append(str(path))
    return written


START_FLOOR = 0.02
"""mAP50-95 below which a trained start cannot carry a comparison: attention blocks move mAP50-95 by 0.003-0.02, and a
start below this detects almost nothing, so every arm fine-tuned from it scores about 0 whatever it holds."""


def too_weak(ab: Ablation) -> str | None:
    """One line naming the first recipe start trained here whose mAP50-95 is below ``START_FLOOR``, what it measured
    and what would give a start that detects; None when every start is above it (or none was trained here)."""
    for st in starts(ab):
        row = record(st)
        if row is None or not isinstance(row.get("map50_95"), (int, float)) or row["map50_95"] >= START_FLOOR:
            continue
        which = f"the start of `{st.arm}`" if st.arm else "the shared start"
        return (f"{which} ({st.describe()}) scores mAP50-95 {row['map50_95']:.4f} on the validation images, below "
                f"{START_FLOOR:g}: no arm fine-tuned from it can show a Δ. Give a start that detects: a trained "
                "checkpoint (start: path/to/yolo11n.pt, loaded weights-only), a longer recipe (start: {epochs: 30}), "
                f"or a larger image size (imgsz=640; now {ab.imgsz})")
    return None


def summary_line(ab: Ablation) -> str:
    """How the arms start, for the summary: from scratch, or from which start (with its own mAP where trained here)."""
    if ab.start is None:
        return "- design: **from scratch**: every arm starts from its own random initialisation (no `start`)"
    if ab.start.kind == INIT:
        nb = ab.new_blocks.describe() if ab.new_blocks is not None else "new blocks at the identity"
        return f"- design: **{ab.start.describe()}**, the blocks inserted with every weight carried by layer ({nb})"
    parts = []
    for s in starts(ab):
        row = record(s)
        got = f"; its mAP50-95 {row['map50_95']:.4f}" if row and row.get("map50_95") is not None else ""
        who = f"arm `{s.arm}`" if s.arm else "every arm"
        parts.append(f"{who}: {s.describe()}{got} (fingerprint {s.fingerprint})")
    nb = ab.new_blocks
    how = (f"the blocks inserted with every weight carried by layer ({nb.describe()})" if nb is not None else
           "the blocks inserted at the identity with every weight carried by layer")
    own = [f"`{v.name}`: {v.block_training.describe()}" for v in ab.variants if v.block_training is not None]
    how += f"; arms' own: {', '.join(own)}" if own else ""
    return f"- design: **warm start**, {how}; " + "; ".join(parts)
