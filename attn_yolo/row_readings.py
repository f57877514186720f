"""Every way to read a YAML row's args, each checked by building the block on the meta device.

Every way to read a YAML row's args: by our signature and each public one (``attn_yolo.signatures``), with and
without a leading channel count, each checked by building the block on the meta device (nothing allocated).

``attn_yolo.conventions`` chooses among the readings (``choose``), logs the one taken and writes the edits of a
refusal; this module only lists and checks them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from attn_yolo.nn.common import AttnBuildError, is_int
from attn_yolo.nn.declaration import Signature, Slot
from attn_yolo.signatures import PLAUSIBLE, signatures


def yaml_params(cls: type) -> list[str]:
    """Names of a block's YAML args, in order: its constructor parameters after ``c1``."""
    return [p for p in inspect.signature(cls).parameters if p != "c1"]


_BUILT: dict[tuple, str | None] = {}  # build_error's results by block, width and hyperparameters (readings repeat them)


def build_error(cls: type, name: str, c1: int, kwargs: dict, where: str) -> str | None:
    """The error building ``cls(c1, **kwargs)`` raises (context ``where``), or None if it builds. Allocates nothing."""
    key = (cls, c1, repr(sorted(kwargs.items(), key=lambda kv: kv[0])))
    if key not in _BUILT:
        if len(_BUILT) > 4096:
            _BUILT.clear()
        try:
            with torch.device("meta"):
                cls(c1, **kwargs)
            _BUILT[key] = None
        except AttnBuildError as e:
            msg = str(e)
            _BUILT[key] = msg[len(name) :] if msg.startswith(f"{name}:") else f": {msg}"
        except (TypeError, ValueError, RuntimeError, OverflowError) as e:  # a reading that fails otherwise: not valid
            _BUILT[key] = f": args {kwargs} do not build: {type(e).__name__}: {e}"
    return None if _BUILT[key] is None else where + _BUILT[key]


@dataclass
class Reading:
    """One way to read a row's args: by signature ``sig`` (None: ours), with a leading channel count dropped or not."""

    sig: Signature | None
    prefix: bool
    kwargs: dict
    notes: list
    error: str | None = None  # the block does not build so
    refusal: str | None = None  # a variant attn_yolo does not provide
    evidence: bool = True  # False: every arg dropped as unused (nothing of the row is read)
    plausible: bool = True  # every value in its PLAUSIBLE range


def _fit(sig: Signature, args: list, counts: dict) -> tuple[dict, list, str | None, bool] | None:
    """``args`` on ``sig``'s slots: ``(kwargs, notes, refusal, evidence)``, or None if they are not of its form."""
    if len(args) > len(sig.slots) or len(args) < sig.min_args:
        return None
    kwargs, notes, refusal, evidence = {}, [], None, not args
    for slot, v in zip(sig.slots, args):
        if slot.kind == "hp":
            kwargs[slot.ours], evidence = v, True
        elif slot.kind == "ch":
            if not ((v is None and None in slot.ok) or (is_int(v) and v in counts)):
                return None
            notes.append(f"{v} is its {slot.name}, a channel count, dropped")
            evidence = True
        elif not slot.test(v):
            return None
        elif slot.kind == "unused":
            notes.append(f"{v!r} is its {slot.name}, which it never uses, dropped")
        elif v in slot.ok:
            evidence = True
        else:
            refusal = f"{slot.name}={v!r} there is {slot.why}"
    return kwargs, notes, refusal, evidence


def all_readings(name: str, cls: type, c1: int, args: list, counts: dict, where: str) -> list[Reading]:
    """Every reading of ``args`` whose form fits: ours, then each public signature; each as written and, if the
    first arg is one of the row's channel counts, with it dropped. Builds each on the meta device (``build_error``)."""
    params = yaml_params(cls)
    ours = Signature(f"{name}({', '.join(params)})", "attn_yolo", tuple(Slot("hp", p, p) for p in params))
    prefixes = [False] + [True] * (bool(args) and is_int(args[0]) and args[0] in counts)
    out = []
    for sig in [ours, *signatures(name)]:
        for prefix in prefixes:
            rest = args[1:] if prefix else args
            fit = _fit(sig, rest, counts)
            if fit is None:
                continue
            kwargs, notes, refusal, evidence = fit
            r = Reading(None if sig is ours else sig, prefix, kwargs, notes, refusal=refusal,
                        evidence=evidence or prefix)
            if prefix:
                r.notes.insert(0, f"{args[0]} is the channel count ({', '.join(counts[args[0]])}), dropped")
            if refusal is None:
                r.error = build_error(cls, name, c1, kwargs, where)
                tests = [(p, test) for (b, p), (test, _) in PLAUSIBLE.items() if b == name and p in kwargs]
                r.plausible = all(test(kwargs[p]) for p, test in tests)
            out.append(r)
    return out


def full_hparams(cls: type, kwargs: dict) -> tuple:
    """The block's hyperparameters a reading gives, defaults filled in (two readings that agree build one block)."""
    return tuple((p.name, tuple(v) if isinstance(v := kwargs.get(p.name, p.default), list) else v)  # lists hashable
                 for p in list(inspect.signature(cls).parameters.values())[1:])


def choose(readings: list[Reading], cls: type) -> list[list[Reading]]:
    """The readings that count, grouped by the block they build (first group first): valid ones that read something
    of the row (dropping every arg as unused tells a typo from nothing: refused, ``_failure``); of those the
    plausible ones if any; a ``prefer`` signature's if it fits."""
    valid = [r for r in readings if r.error is None and r.refusal is None and r.evidence]
    pool = [r for r in valid if r.plausible] or valid
    pool = [r for r in pool if r.sig and r.sig.prefer and r.kwargs] or pool
    groups: dict[tuple, list] = {}
    for r in pool:
        groups.setdefault(full_hparams(cls, r.kwargs), []).append(r)
    return list(groups.values())
