"""An arm's new blocks: which they are, how they train from the start, and whether they attended (the attention check).

The config keys (``attn_yolo.ablate.config.design``'s design keys):

- ``new_blocks: {lr_mult, gamma, probe_steps, probe_lr_mult}``: how the blocks an arm adds to the baseline train from
  the start (``NewBlocks``). Their parameters get ``lr_mult`` × ``lr0`` (a parameter group of their own, on
  Ultralytics' schedule); ``gamma`` is their residual gates' ``γ`` at step 0 (0.0: every arm predicts exactly what the
  start predicts before its first step); ``probe_steps`` > 0 first trains the new blocks alone for that many steps at
  ``probe_lr_mult`` × ``lr0`` (every other weight at rate 0, in the baseline too: linear probe, then fine-tune).
  Defaults: ``NewBlocks``, chosen by the study in BENCHMARKS.md (``scripts/warmstart_study.py``). A variant may
  carry its own ``new_blocks``.
- ``treatment: {threshold: 1.0}``: the attention check below.

The attention check: whether what an arm's blocks attend to matters to its trained model, so that a verdict about
them is one about attention.

An arm that adds blocks to the baseline is a test of attention only if the blocks' input-dependent part (their gates
and attention maps) changed the model it trained. A block whose gates stayed flat acts as a fixed rescale
``x + γ (s̄ x − x)``, which the rest of the network adapts to in a few steps: knocking it out then moves mAP, but
nothing it attends to does. So after each such run its ``best.pt`` is validated on the validation images four times,
with the same validator settings (``attn_yolo.ablate.runs.train.attention_figures``):

- as trained, recording each gate's mean over the images;
- **mean-ablated** (``attn_yolo.health.mean_ablation``): every gate held at its mean, every attention uniform over
  its keys: ``a_i = mAP50-95(arm) − mAP50-95(arm, mean-ablated)`` (``mean_ablation_effect``), the criterion;
- with every new block replaced by the identity (``knocked_out``): ``t_i`` (``knockout_effect``), beside it;
- with the blocks' weights re-initialised and ``γ`` kept (``reinitialised``): ``reinit_effect``, beside it.

The criterion (``check``): ``A = mean_i |a_i|`` over the arm's paired seeds must be more than 0 and at least
``threshold`` (default 1) × the *resolution* of the design, the half-width ``(hi − lo) / 2`` of the interval that
decides the arm's verdict. Why mean ablation and not the knock-out: a verdict claims the arm's Δ lies in ``[lo, hi]``;
if removing the blocks' dependence on the input (keeping their average scale) moves its mAP by less than half that
width, the arm differs from "baseline + a constant rescale" by less than the design can resolve, and any Δ it shows
could not be told from one that attention did not cause. ``|a_i|``: attention that matters changes the model either
way; the sign is the verdict's business. Blocks with nothing to hold at a mean (the ``Placebo`` control: no gate, no
attention) are checked by the identity in their place (``criterion`` ``"knock-out"``).

An arm that fails it gets **not tested** instead of better / worse / no difference, with the figures and the likely
cause (``likely_cause``: ``γ``, the gates' entropy, the knock-out beside the mean ablation).
"""

from __future__ import annotations

import copy
import dataclasses
import math

from torch import nn

from attn_yolo.args import Key, Schema

KNOCKOUT_NAME = "perimage-knockout.npz"
THRESHOLD = 1.0  # A must be at least this × the deciding interval's half-width
GAMMA_NEAR_IDENTITY = 0.01  # a mean |γ| below this: "the blocks stayed near the identity"


# ------------------------------------------------------------------------------------------------ the config keys


@dataclasses.dataclass(frozen=True)
class NewBlocks:
    """How an arm's new blocks train from the start (config ``new_blocks``, module docstring).

    Args:
        lr_mult: learning rate of the new blocks' parameters as a multiple of ``lr0`` (> 0, at most 1000).
        gamma: their residual gates' ``γ`` at step 0, in [0, 1] (0: the arm starts as the start's exact copy).
        probe_steps: optimizer steps of a probe phase first (an int >= 0; 0: none): the new blocks alone train, at
            ``probe_lr_mult`` × lr0, every other weight at learning rate 0 (linear probe, then fine-tune: Kumar et
            al., ICLR 2022). The baseline keeps every weight still for as many steps, so that every arm fine-tunes
            its whole model for the same steps on the same batches.
        probe_lr_mult: the new blocks' learning rate in the probe phase, × lr0 (> 0, at most 1000).
    """

    lr_mult: float = 1.0
    gamma: float = 0.3
    probe_steps: int = 0
    probe_lr_mult: float = 10.0

    def describe(self) -> str:
        """One line for the plan and the summary."""
        ident = "identity at step 0" if self.gamma == 0 else f"γ = {self.gamma:g} at step 0, not the identity"
        probe = (f"; first {self.probe_steps} steps the new blocks alone at {self.probe_lr_mult:g} × lr0"
                 if self.probe_steps else "")
        return f"new blocks: learning rate {self.lr_mult:g} × lr0, {ident}{probe}"


@dataclasses.dataclass(frozen=True)
class Treatment:
    """The attention check's setting (config ``treatment``): ``threshold`` × the deciding interval's half-width is
    the mean-ablation effect an arm's blocks must reach (``attn_yolo.ablate.statistics.treatment``), in (0, 10]."""

    threshold: float = THRESHOLD


NEW_BLOCKS = Schema([  # config `new_blocks` (and a variant's own): NewBlocks' fields, declared once
    Key("lr_mult", "float", NewBlocks.lr_mult, "the new blocks' learning rate, × lr0", low=0, high=1000, low_open=True,
        note="(× lr0)"),
    Key("gamma", "float", NewBlocks.gamma, "their residual gates' γ at step 0", low=0, high=1,
        note="(the residual gates' γ at step 0)"),
    Key("probe_steps", "int", NewBlocks.probe_steps, "optimizer steps of a probe phase first", low=0, high=100_000,
        note="(optimizer steps of the probe phase; 0: none)"),
    Key("probe_lr_mult", "float", NewBlocks.probe_lr_mult, "the new blocks' learning rate in the probe phase, × lr0",
        low=0, high=1000, low_open=True, note="(× lr0, in the probe phase)"),
])
"""The ``new_blocks`` keys: their types, ranges and defaults (``check_new_blocks``)."""
TREATMENT = Schema([  # config `treatment`
    Key("threshold", "float", THRESHOLD, "the attention check's threshold", low=0, high=10, low_open=True,
        note="(the mean-ablation effect an arm's blocks must reach, in half-widths of its deciding interval)"),
])
"""The ``treatment`` keys (``check_treatment``)."""


def _typed(schema: Schema, values: dict) -> dict:
    """A checked section's values as its dataclass holds them: a ``float`` key as a float (``lr_mult: 1`` → 1.0)."""
    return {k.name: float(values[k.name]) if k.type == "float" else values[k.name] for k in schema}


def check_new_blocks(raw) -> tuple[NewBlocks, list[str]]:
    """``new_blocks: {lr_mult, gamma, probe_steps, probe_lr_mult}`` → ``NewBlocks`` (defaults where absent or bad),
    with problems naming each key as ``NEW_BLOCKS.check`` writes them (``new_blocks.<key>: <value>; expected
    <allowed>``)."""
    values, problems = NEW_BLOCKS.check(raw, "new_blocks.")
    return NewBlocks(**_typed(NEW_BLOCKS, values)), problems


def check_treatment(raw) -> tuple[Treatment, list[str]]:
    """``treatment: {threshold}`` → ``Treatment`` (the default where absent or bad), with problems naming each key."""
    values, problems = TREATMENT.check(raw, "treatment.")
    return Treatment(**_typed(TREATMENT, values)), problems


# ------------------------------------------------------------------------------------------------ which blocks


def new_block_paths(base_dict: dict, arm_dict: dict, model: nn.Module) -> list[str] | None:
    """Module paths (``model.5``, ``model.4.m.0.attn``) of the blocks ``arm_dict`` adds to ``base_dict``, in the built
    ``model`` (a ``DetectionModel`` of ``arm_dict``): every inserted row whole, and in each row whose module differs
    from its base row (``C3k2`` → ``C3k2_CBAM``) the attention blocks inside it.

    Returns:
        The paths; ``[]`` for the baseline itself; None when ``arm_dict`` is not ``base_dict`` with blocks inserted
        (another model: the check does not apply).
    """
    from attn_yolo.capture import attention_blocks
    from attn_yolo.insertion import InsertionError, layer_map
    from attn_yolo.insertion.base import model_rows

    if (base_dict.get("scale") or "") != (arm_dict.get("scale") or ""):  # the same rows at another scale
        return None
    try:
        m = layer_map(base_dict, arm_dict, ("baseline", "arm"))
    except InsertionError:
        return None
    base_rows, arm_rows = model_rows(base_dict), model_rows(arm_dict)
    inserted = sorted(set(range(len(arm_rows))) - set(m.values()))
    changed = {j for i, j in m.items() if arm_rows[j][2] != base_rows[i][2]}
    inner = [f"model.{i}.{p}" for (i, p) in attention_blocks(model) if i in changed and p]
    return [f"model.{j}" for j in inserted] + inner


class KnockedOut(nn.Identity):
    """The identity in place of a block, keeping the attributes Ultralytics' forward reads off a row (``f``, ``i``,
    ``type``, ``np``)."""

    def __init__(self, block: nn.Module):
        super().__init__()
        for k in ("f", "i", "type", "np"):
            if hasattr(block, k):
                setattr(self, k, getattr(block, k))


def knocked_out(model: nn.Module, paths: list[str]) -> nn.Module:
    """A deep copy of ``model`` with the module at each path replaced by the identity (``KnockedOut``).

    Raises:
        KeyError: a path that is not a submodule of ``model``.
    """
    model = copy.deepcopy(model)
    for path in paths:
        parent, _, name = path.rpartition(".")
        owner = model.get_submodule(parent)
        owner._modules[name] = KnockedOut(owner.get_submodule(name))  # nn.Sequential / ModuleList keep their order
    return model


def reinitialised(model: nn.Module, paths: list[str], seed: int = 0) -> nn.Module:
    """A deep copy of ``model`` whose blocks at ``paths`` have their learned weights drawn anew (every submodule's
    ``reset_parameters``, after ``torch.manual_seed(seed)``) and their residual gates' ``γ`` kept: the attention
    check's control, what the blocks' scale alone does without what they learned.

    Raises:
        AttributeError: a path that is not a submodule of ``model``.
    """
    import torch

    from attn_yolo.nn.layer_scale import LayerScale

    model = copy.deepcopy(model)
    torch.manual_seed(seed)
    for path in paths:
        for mod in model.get_submodule(path).modules():
            if not isinstance(mod, LayerScale) and hasattr(mod, "reset_parameters"):
                mod.reset_parameters()
    return model


def block_parameters(model: nn.Module, paths: list[str]) -> list[str]:
    """Names of the parameters of the blocks at ``paths`` (``named_parameters`` of ``model``, a ``module.`` prefix of
    a DDP wrapper ignored)."""
    prefixes = tuple(p + "." for p in paths)
    return [n for n, _ in model.named_parameters() if n.removeprefix("module.").startswith(prefixes)]


def set_gamma(model: nn.Module, paths: list[str], value: float) -> int:
    """Set every residual gate ``γ`` (``LayerScale``) inside the blocks at ``paths`` to ``value``; returns how many
    gates were set."""
    import torch

    from attn_yolo.nn.layer_scale import LayerScale

    n = 0
    with torch.no_grad():
        for path in paths:
            for mod in model.get_submodule(path).modules():
                if isinstance(mod, LayerScale):
                    mod.gamma.fill_(value)
                    n += 1
    return n


# ------------------------------------------------------------------------------------------------ the criterion


def _per_seed(rows: list[dict], arm: str, seeds: list[int], key: str) -> list[float]:
    got = {r["seed"]: r.get(key) for r in rows if r["variant"] == arm and r["status"] == "ok" and r["seed"] in seeds}
    return [float(got[s]) for s in seeds if isinstance(got.get(s), (int, float)) and math.isfinite(got[s])]


def _mean_abs(vals: list[float]) -> float:
    return sum(map(abs, vals)) / len(vals) if vals else math.nan


def effect(rows: list[dict], arm: str, seeds: list[int]) -> dict:
    """The figures of ``arm``'s attention check over ``seeds`` (module docstring).

    Returns:
        ``{"criterion", "A", "mean", "n", "per_seed", "knockout", "reinit"}``: ``criterion`` ``"mean ablation"``
        (``A`` = mean over seeds of |mAP50-95 − the same with the blocks' gates and attention at their mean|) or,
        for blocks with nothing to hold at a mean (a ``Placebo``), ``"knock-out"`` (``A`` from the identity in
        their place); ``knockout`` and ``reinit``: the mean |Δ| of the identity and of re-initialised blocks, beside
        it. ``n`` = 0 where no run of those seeds has the deciding figure.
    """
    by_check = {r.get("attention_check") for r in rows if r["variant"] == arm and r["seed"] in seeds}
    criterion = "knock-out" if by_check == {"knock-out"} else "mean ablation"
    vals = _per_seed(rows, arm, seeds, "mean_ablation_effect" if criterion == "mean ablation" else "knockout_effect")
    return {"criterion": criterion, "A": _mean_abs(vals), "mean": sum(vals) / len(vals) if vals else math.nan,
            "n": len(vals), "per_seed": vals, "knockout": _mean_abs(_per_seed(rows, arm, seeds, "knockout_effect")),
            "reinit": _mean_abs(_per_seed(rows, arm, seeds, "reinit_effect"))}


def check(fx: dict, lo: float, hi: float, threshold: float = THRESHOLD) -> dict:
    """Whether an arm passes the attention check (module docstring).

    Args:
        fx: ``effect`` of the arm.
        lo, hi: the interval that decides its verdict.
        threshold: ``A`` must be ≥ ``threshold`` × ``(hi − lo) / 2``.

    Returns:
        ``fx`` with ``{"status": "passed" | "failed" | "n/a", "resolution", "why"}``; ``n/a`` without the figures or
        with an unbounded interval (the verdict is n/a then anyway).
    """
    res = (hi - lo) / 2 if math.isfinite(lo) and math.isfinite(hi) else math.inf
    what = "mean-ablation" if fx["criterion"] == "mean ablation" else "knock-out"
    if fx["n"] == 0:
        return {**fx, "status": "n/a", "resolution": res, "why": f"no {what} figures in the run records"}
    if not math.isfinite(res):
        return {**fx, "status": "n/a", "resolution": res, "why": "the deciding interval is still unbounded"}
    ok = fx["A"] > 0 and fx["A"] >= threshold * res  # blocks that change nothing never pass, not even at width 0
    return {**fx, "status": "passed" if ok else "failed", "resolution": res,
            "why": f"{what} effect {fx['A']:.4f} {'>=' if ok else '<'} {threshold:g} × resolution ±{res:.4f}"}


def likely_cause(fx: dict, health: dict, trained_start: bool = True) -> tuple[str, str]:
    """Why an arm's blocks did not matter as attention, and what to try: ``(cause, remedy)``. ``fx`` is its ``check``,
    ``health`` its attention health (``attn_yolo.health.report.arm_health``: ``gamma``, ``entropy``, ``knockout``
    means over seeds); ``trained_start``: the arms were fine-tuned from a trained start (a checkpoint or a recipe),
    not from an untrained initialisation (``start: init``) or from scratch.

    Seeds whose gates mattered by the resolution or more are named first: they show that the blocks can attend
    here, so the arm is no fixed rescale, whatever the identity's effect beside them."""
    g, ent = health.get("gamma", math.nan), health.get("entropy", math.nan)
    if math.isfinite(g) and g < GAMMA_NEAR_IDENTITY:
        return ("the blocks stayed near the identity", "give the new blocks their own learning rate "
                "(new_blocks: {lr_mult: ...}), a non-zero start (new_blocks: {gamma: ...}) or more steps")
    res, per_seed = fx.get("resolution", math.nan), fx.get("per_seed", [])
    attending = sum(abs(a) >= res for a in per_seed)
    if 0 < attending < len(per_seed):  # some seeds learned to attend, the others not: a bimodal effect
        return (f"the blocks attend in {attending} of {len(per_seed)} seeds only (there their mean gates in place "
                f"change mAP50-95 by at least the ±{res:.4f} this design resolves; in the other seeds they did not "
                f"learn to attend)", "more seeds (seeds.max) narrow the interval; the seeds in which the blocks did "
                "not learn to attend pull the mean effect down")
    if fx["criterion"] == "mean ablation" and fx["knockout"] >= max(2 * fx["A"], fx["resolution"]):
        flat = f"gates flat: entropy {ent:.3f}; " if math.isfinite(ent) else ""
        remedy = ("blocks inserted into a trained start did not learn to attend in any schedule tried, even where "
                  "the data needs it; trained with the model from its initialisation (`start: init`, or no `start`) "
                  "on such data, they did (BENCHMARKS.md, section 12)" if trained_start else
                  "trained with the model from its initialisation, the blocks learned no input-dependent gate on "
                  "these data, so the model uses their scale alone; gates learn what the data make them need (on "
                  "synthetic-key CBAM's max-pooled gate carried the key in some seeds, SE's and ECA's average-pooled "
                  "gates in none: BENCHMARKS.md, section 12.5)")
        return (f"the blocks act as a fixed rescale ({flat}the identity in their place changes mAP50-95 by "
                f"{fx['knockout']:.4f}, their mean gates by {fx['A']:.4f})", remedy)
    return ("the model does not rely on the blocks by as much as this design resolves",
            "more seeds (seeds.max) or more validation images narrow the interval")
