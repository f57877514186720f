"""An arm's new blocks: which they are, how they train from the start, and whether they mattered (the treatment check).

The config keys (``attn_yolo.ablate.design``'s design keys):

- ``new_blocks: {lr_mult: 1.0, gamma: 0.3}``: how the blocks an arm adds to the baseline train from the start. Their
  parameters get ``lr_mult`` × ``lr0`` (a parameter group of their own, on Ultralytics' schedule and warmup), the
  usual fine-tuning practice for new layers on a pretrained network; ``gamma`` is their residual gates' ``γ`` at
  step 0 (0.0: every arm predicts exactly what the start predicts before its first step; > 0 gives up that identity
  for a block whose own weights get gradient from the first step). Defaults: ``NewBlocks``, chosen by the study in
  BENCHMARKS.md (``scripts/warmstart_study.py``). A variant may carry its own ``new_blocks``.
- ``treatment: {threshold: 1.0}``: the treatment check below.

The treatment check: whether an arm's own blocks matter to its trained model, so that a verdict about them is one.

An arm that adds blocks to the baseline (a variant, a placebo, an inserted-block reference) is a test of those blocks
only if they changed the model it trained. With a warm start the blocks start as the identity (``γ = 0``); if they
stay near it, the arm is the baseline plus an identity and its Δ says nothing about the blocks, however narrow the
interval. So after each such run:

- **knock-out**: its ``best.pt`` is validated twice on the validation images, with the same validator settings: as
  trained, and with every new block replaced by the identity (``knocked_out``: an inserted row by an
  ``nn.Identity`` that keeps Ultralytics' row bookkeeping, the attention block inside a ``C3k2_<X>`` row by an
  ``nn.Identity``). Its per-seed treatment effect is ``t_i = mAP50-95(arm) − mAP50-95(arm, blocks knocked out)``
  (``treatment_map50_95`` in the run's record; the knocked-out validation image by image in
  ``perimage-knockout.npz``).
- **the criterion** (``check``): the arm's *blocks' effect* ``T = mean_i |t_i|`` over its paired seeds must be more
  than 0 and at least ``threshold`` (default 1) × the *resolution* of the design, the half-width ``(hi − lo) / 2``
  of the interval that decides the arm's verdict (the joint group-sequential interval with seeds chosen by the data,
  else the hierarchical one). Why this is the right yardstick: a verdict claims the arm's Δ lies in ``[lo, hi]``. If the
  arm's own blocks, removed from the model that learned with them, move its mAP by less than half that width, the
  arm differs from "baseline + identity" by less than the design can resolve: any Δ it shows could not be told from
  one the blocks did not cause, and "no difference beyond ±w" would be a statement about a block that was never
  applied. ``|t_i|`` rather than ``t_i``: a block that matters changes the model either way; its sign is the
  verdict's business. Per seed and not per image: the verdict is about the mean over seeds.
- an arm that fails it gets **not tested** instead of better / worse / no difference, with the figures and the likely
  cause from its attention health (``γ``, the raw-output knock-out of ``attn_yolo.health``).

The knock-out costs two validations per run (the run's own final validation is not reused: its validator settings
differ from a standalone one, and the two figures must be paired exactly).
"""

from __future__ import annotations

import copy
import dataclasses
import math

from torch import nn

KNOCKOUT_NAME = "perimage-knockout.npz"
THRESHOLD = 1.0  # T must be at least this × the deciding interval's half-width
THRESHOLD_RANGE = (0.0, 10.0)  # (exclusive, inclusive)
GAMMA_NEAR_IDENTITY = 0.01  # a mean |γ| below this: "the blocks stayed near the identity"
NEW_BLOCKS_KEYS = ("lr_mult", "gamma")
TREATMENT_KEYS = ("threshold",)


# ------------------------------------------------------------------------------------------------ the config keys


@dataclasses.dataclass(frozen=True)
class NewBlocks:
    """How an arm's new blocks train from the start (config ``new_blocks``, module docstring).

    Args:
        lr_mult: learning rate of the new blocks' parameters as a multiple of ``lr0`` (> 0, at most 1000).
        gamma: their residual gates' ``γ`` at step 0, in [0, 1] (0: the arm starts as the start's exact copy).
    """

    lr_mult: float = 1.0  # the study: a higher rate moves γ (about 0.0025 × lr_mult) but not the knock-out effect
    gamma: float = 0.3  # the study: the one start whose blocks matter beyond the default design's resolution

    def describe(self) -> str:
        """One line for the plan and the summary."""
        ident = "identity at step 0" if self.gamma == 0 else f"γ = {self.gamma:g} at step 0, not the identity"
        return f"new blocks: learning rate {self.lr_mult:g} × lr0, {ident}"


@dataclasses.dataclass(frozen=True)
class Treatment:
    """The treatment check's setting (config ``treatment``): ``threshold`` × the deciding interval's half-width is
    the knock-out effect an arm's blocks must reach (``attn_yolo.ablate.treatment``), in (0, 10]."""

    threshold: float = 1.0


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_new_blocks(raw) -> tuple[NewBlocks, list[str]]:
    """``new_blocks: {lr_mult, gamma}`` → ``NewBlocks`` (defaults where absent), with problems naming each key."""
    if raw is None:
        return NewBlocks(), []
    if not isinstance(raw, dict):
        return NewBlocks(), [f"new_blocks: {raw!r}; expected a mapping such as {{lr_mult: 1.0, gamma: 0.3}} (the "
                             "defaults)"]
    problems = [f"new_blocks.{k}: unknown key; allowed: {', '.join(NEW_BLOCKS_KEYS)}" for k in raw
                if k not in NEW_BLOCKS_KEYS]
    got = {}
    lr = raw.get("lr_mult", NewBlocks.lr_mult)
    if not (_number(lr) and 0 < lr <= 1000):
        problems.append(f"new_blocks.lr_mult: {lr!r}; expected a number > 0 and <= 1000 (the new blocks' learning "
                        "rate as a multiple of lr0)")
    else:
        got["lr_mult"] = float(lr)
    g = raw.get("gamma", NewBlocks.gamma)
    if not (_number(g) and 0 <= g <= 1):
        problems.append(f"new_blocks.gamma: {g!r}; expected a number in [0, 1] (the residual gates' γ at step 0)")
    else:
        got["gamma"] = float(g)
    return NewBlocks(**got), problems


def check_treatment(raw) -> tuple[Treatment, list[str]]:
    """``treatment: {threshold}`` → ``Treatment``, with problems naming each key."""
    if raw is None:
        return Treatment(), []
    if not isinstance(raw, dict):
        return Treatment(), [f"treatment: {raw!r}; expected a mapping such as {{threshold: 1.0}}"]
    problems = [f"treatment.{k}: unknown key; allowed: {', '.join(TREATMENT_KEYS)}" for k in raw
                if k not in TREATMENT_KEYS]
    t = raw.get("threshold", Treatment.threshold)
    if not (_number(t) and 0 < t <= 10):
        problems.append(f"treatment.threshold: {t!r}; expected a number > 0 and <= 10 (the knock-out effect an arm's "
                        "blocks must reach, in half-widths of its deciding interval)")
        return Treatment(), problems
    return Treatment(float(t)), problems




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


def effect(rows: list[dict], arm: str, seeds: list[int]) -> dict:
    """The blocks' effect of ``arm`` over ``seeds``: ``{"T": mean |t_i|, "mean": mean t_i, "n", "per_seed"}``;
    ``n`` = 0 where no run of those seeds has a knock-out figure."""
    t = {r["seed"]: r.get("treatment_map50_95") for r in rows
         if r["variant"] == arm and r["status"] == "ok" and r["seed"] in seeds}
    vals = [float(t[s]) for s in seeds if isinstance(t.get(s), (int, float)) and math.isfinite(t[s])]
    if not vals:
        return {"T": math.nan, "mean": math.nan, "n": 0, "per_seed": []}
    return {"T": sum(map(abs, vals)) / len(vals), "mean": sum(vals) / len(vals), "n": len(vals), "per_seed": vals}


def check(fx: dict, lo: float, hi: float, threshold: float = THRESHOLD) -> dict:
    """Whether an arm passes the treatment check (module docstring).

    Args:
        fx: ``effect`` of the arm.
        lo, hi: the interval that decides its verdict.
        threshold: ``T`` must be ≥ ``threshold`` × ``(hi − lo) / 2``.

    Returns:
        ``{"status": "passed" | "failed" | "n/a", "T", "resolution", "why"}``; ``n/a`` without knock-out figures or
        with an unbounded interval (the verdict is n/a then anyway).
    """
    res = (hi - lo) / 2 if math.isfinite(lo) and math.isfinite(hi) else math.inf
    if fx["n"] == 0:
        return {"status": "n/a", "T": math.nan, "resolution": res, "why": "no knock-out figures in the run records"}
    if not math.isfinite(res):
        return {"status": "n/a", "T": fx["T"], "resolution": res, "why": "the deciding interval is still unbounded"}
    ok = fx["T"] > 0 and fx["T"] >= threshold * res  # blocks that change nothing never pass, not even at width 0
    return {"status": "passed" if ok else "failed", "T": fx["T"], "resolution": res,
            "why": f"knock-out effect {fx['T']:.4f} {'>=' if ok else '<'} {threshold:g} × resolution ±{res:.4f}"}


def likely_cause(health: dict) -> str:
    """Why an arm's blocks did not matter, from its attention health (``{"gamma", "knockout"}`` means over seeds)."""
    g, ko = health.get("gamma", math.nan), health.get("knockout", math.nan)
    if math.isfinite(g) and g < GAMMA_NEAR_IDENTITY:
        return ("the blocks stayed near the identity; give the new blocks their own learning rate "
                "(new_blocks: {lr_mult: ...}), a non-zero start (new_blocks: {gamma: ...}) or more steps")
    if math.isfinite(ko) and ko < 1e-3:
        return "the blocks' output barely differs from their input; give them more steps or their own learning rate"
    return ("the model does not rely on the blocks by as much as this design resolves; more seeds (seeds.max) or "
            "more validation images narrow the interval")
