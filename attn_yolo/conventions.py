"""How a YAML row's block gets its input width and args: its row marker resolves them by public YAMLs' conventions.

The one path: ``attn_yolo.registry``'s wrapped ``parse_model`` puts a ``RowArgs`` marker in place of an attention
row's args; the block passes it to ``attn_yolo.nn.common.resolve``, which calls ``RowArgs.resolve``: it takes the
row's input width, index and scale from ``parse_model`` (``attn_yolo.ultralytics_api.parse_model_row``) and reads the
args by the conventions below. Nothing is set at import.

Public YAMLs that put attention into yolov8 / yolo11 write a block's args in several styles. Each row is read as its
author meant, with one log line that names the row and says how it was read, or refused with the exact edit:

1. **Channel count first** (``CBAM, [1024]``, ``SE, [1024, 16]``, ``ECAAttention, [256]``): a leading int that is one
   of the row's channel counts is read as the channel count and dropped; the remaining args are hyperparameters. The
   row's channel counts are its input width before width scaling (the source row's own ``args[0]``, or the sum over
   a Concat's inputs, as written in the YAML) and as built at every scale of the YAML (so ``[256]`` written for
   scale n also reads at scale x). The input width itself always comes from the layer the row reads.
2. **Ultralytics' CBAM signature** ``CBAM(c1, kernel_size=7)``: a lone CBAM arg 3 or 7 (after an optional channel
   count) is the spatial kernel ``k``, with ``r`` at its default: ``CBAM, [7]`` and ``CBAM, [1024, 3]``.
3. Otherwise the args are the block's hyperparameters in signature order, as ``attn-yolo modules`` lists them.

Ambiguity rule: a leading int that is a channel count is dropped when the args read as written are not a valid
configuration of the block at this width, or read it as an implausible value (``FIRST_MAX``: a reduction ratio
above 32, beyond the SE paper's range, is taken for a channel count). If both readings are valid and plausible
(e.g. ``SE, [32]`` on a 32-channel layer), the row is refused with the two edits, never guessed.

``RowArgs`` is the marker ``attn_yolo.registry`` puts in place of an attention row's args; its ``resolve`` method
(``resolve_row``) reads it when the block is built inside ``parse_model``.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
from dataclasses import dataclass

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.nn.common import AttnBuildError, _InferredC1, is_int

KERNEL_ALONE = {"CBAM": "k"}
"""Blocks whose lone arg 3 or 7 is the spatial kernel (Ultralytics' ``CBAM(c1, kernel_size=7)``): name -> param."""

FIRST_MAX = {"SE": 32, "CBAM": 32}
"""A leading value above this, which is also a channel count of the row, is a channel count, not the block's first
hyperparameter (SE/CBAM ``r``: Hu et al. tried 2 to 32)."""

UNSCALED = "before width scaling"

NONE_MEANS = {("ECA", "k"): "adaptive", ("EMA", "factor"): "adaptive", ("ShuffleAttention", "groups"): "adaptive",
              ("SKAttention", "groups"): "adaptive", ("BiLevelRoutingAttention", "heads"): "C/32"}
"""What a hyperparameter left at None means, where it is worth saying (``attn-yolo modules``, insert's printout)."""


def yaml_params(cls: type) -> list[str]:
    """Names of a block's YAML args, in order: its constructor parameters after ``c1``."""
    return [p for p in inspect.signature(cls).parameters if p != "c1"]


def fmt(args) -> str:
    """A list of args as written in a YAML row: ``[1024, 16]``."""
    return "[" + ", ".join("None" if a is None else repr(a) if isinstance(a, str) else str(a) for a in args) + "]"


def bind(name: str, cls: type, args: list) -> tuple[dict, str] | None:
    """Map a row's hyperparameter args to ``cls`` keywords: ``(kwargs, note)``; None if there are too many args.

    A lone 3 or 7 of a ``KERNEL_ALONE`` block is its kernel size (note says so); otherwise args are positional.
    """
    if name in KERNEL_ALONE and len(args) == 1 and is_int(args[0]) and args[0] in (3, 7):
        k = KERNEL_ALONE[name]
        return {k: args[0]}, f"a lone {args[0]} is the spatial kernel {k} (Ultralytics' CBAM(c1, kernel_size))"
    params = yaml_params(cls)
    return (dict(zip(params, args)), "") if len(args) <= len(params) else None


@dataclass
class YamlInfo:
    """What the channel-count convention needs from a model dict, taken before ``parse_model`` edits it."""

    rows: list
    scales: dict  # scale name (None without ``scales``) -> (width multiple, max channels)
    channels: int
    attention: set  # indices of attention rows (they keep their input width)

    @classmethod
    def of(cls, d: dict, ch: int, attention: set) -> YamlInfo:
        scales = {s: (v[1], v[2]) for s, v in (d.get("scales") or {}).items()}
        scales = scales or {None: (d.get("width_multiple", 1.0), float("inf"))}
        return cls(list(d.get("backbone") or []) + list(d.get("head") or []), scales, ch, attention)


class RowArgs(_InferredC1):
    """Row marker: the args of an attention row as written, the module name as written and its block.

    Prints as ``c1`` in Ultralytics' layer table until the block is built, then as the args it was built with.
    """

    def __init__(self, info: YamlInfo, i: int, written: str, name: str, cls: type, args: list, note: str = ""):
        self.info, self.i, self.written, self.name, self.cls, self.args, self.note = (
            info, i, written, name, cls, list(args), note
        )
        self.shown, self.logged = "c1", False

    def __repr__(self) -> str:
        return self.shown

    def resolve(self, name: str, values: tuple) -> tuple[int, str, tuple]:
        """``(input width, context, hyperparameters)`` of the row being built (``resolve_row``)."""
        return resolve_row(self, name, values)


def _src(i: int, f: int) -> int:
    """Absolute index of the layer ``from`` field ``f`` of row ``i`` reads (-1: the input image, row 0 only)."""
    return f if f >= 0 or i == 0 else i + f


def channel_counts(info: YamlInfo, row: api.Row) -> dict[int, list[str]]:
    """Channel counts of the layer an attention row reads: ``{width: [how, ...]}``.

    ``how`` is ``"before width scaling"`` (the YAML's own number) or ``"at scale s"`` (as built at that scale); the
    width as built now is always included. Each earlier row is classified from the widths built so far: it sets its
    width from ``args[0]`` (Conv, C2f, C3k2, SPPF, ... scaled as Ultralytics does), is a Concat (sum of its inputs),
    or keeps its input width (Upsample, attention blocks, ...); a row that is none of these contributes no count.
    """
    w_now, mc_now = info.scales.get(row.scale, next(iter(info.scales.values())))

    scaled = api.scaled_width  # parse_model's width rule

    def built(t: int) -> int:
        return info.channels if t < 0 else row.ch[t]

    def kind(t: int) -> str:
        f, _, m, args = info.rows[t]
        if t in info.attention:
            return "keep"
        if m == "Concat" and isinstance(f, list):
            return "concat"
        if args and is_int(args[0]) and scaled(args[0], w_now, mc_now) == row.ch[t]:
            return "set"
        return "keep" if is_int(f) and built(_src(t, f)) == row.ch[t] else "unknown"

    @functools.cache
    def width(t: int, scale) -> int | None:
        if t < 0:
            return info.channels
        f, _, _, args = info.rows[t]
        k = kind(t)
        if k == "set":
            return args[0] if scale == UNSCALED else scaled(args[0], *info.scales[scale])
        if k == "concat":
            parts = [width(_src(t, x), scale) for x in f]
            return None if None in parts else sum(parts)
        return width(_src(t, f), scale) if k == "keep" else None

    src = _src(row.i, row.f)
    out: dict[int, list[str]] = {row.c1: [f"as built{f' at scale {row.scale}' if row.scale else ''}"]}
    for scale in [UNSCALED, *info.scales]:
        c = width(src, scale)
        if c is not None and scale != row.scale:
            out.setdefault(c, []).append(UNSCALED if scale == UNSCALED else f"at scale {scale}")
    return out


def describe(counts: dict[int, list[str]]) -> str:
    """``256 as built at scale n; 1024 before width scaling; 512 at scale s, at scale m``."""
    return "; ".join(f"{c} {', '.join(how)}" for c, how in counts.items())


def _evaluate(args: list, names: dict) -> list:
    """String args as Ultralytics evaluates them: a ``parse_model`` local (``"nc"``) or a Python literal."""
    out = []
    for a in args:
        if isinstance(a, str):
            if a in names:
                a = names[a]
            else:
                with contextlib.suppress(ValueError, SyntaxError):
                    a = ast.literal_eval(a)
        out.append(a)
    return out


def _error(cls: type, name: str, c1: int, kwargs: dict, where: str) -> str | None:
    """The error building ``cls(c1, **kwargs)`` raises (context ``where``), or None if it builds. Allocates nothing."""
    try:
        with torch.device("meta"):
            cls(c1, **kwargs)
    except AttnBuildError as e:
        msg = str(e)
        return where + msg[len(name) :] if msg.startswith(f"{name}:") else f"{where}: {msg}"
    except (TypeError, ValueError, RuntimeError, OverflowError) as e:  # a reading that fails otherwise: not valid
        return f"{where}: args {kwargs} do not build: {type(e).__name__}: {e}"
    return None


def read_args(name: str, cls: type, c1: int, args: list, counts: dict[int, list[str]], where: str):
    """The hyperparameters a row's ``args`` mean for block ``name`` at input width ``c1``: ``(kwargs, notes)``.

    ``counts`` are the row's channel counts (``channel_counts``); ``notes`` say how the args were read, empty when
    read as written. Applies the conventions and the ambiguity rule of this module.

    Raises:
        AttnBuildError: no reading builds, or two do (ambiguous); the message gives the edit.
    """
    params, a0 = yaml_params(cls), args[0] if args else None
    as_written = bind(name, cls, args)
    err1 = _error(cls, name, c1, as_written[0], where) if as_written else (
        f"{where}: args={fmt(args)} has {len(args)} values; {name} takes at most {len(params)}: "
        f"[{', '.join(params)}] after an optional leading channel count, and {a0!r} is not one of this row's "
        f"({describe(counts)})"
    )
    if not (is_int(a0) and a0 in counts):
        if err1 is None:
            return as_written[0], [as_written[1]] if as_written[1] else []
        hint = ""
        if is_int(a0) and a0 >= 16 and f" {params[0]}={a0!r} is invalid" in err1:
            hint = (f". If {a0} is meant as the channel count, it is not one of this row's ({describe(counts)}): "
                    f"write one of those, or drop it: {fmt(args[1:])}")
        raise AttnBuildError(err1 + hint)

    rest = bind(name, cls, args[1:])
    err2 = _error(cls, name, c1, rest[0], where) if rest else f"{where}: args={fmt(args)} has too many values"
    first = next(iter(as_written[0]), params[0]) if as_written else params[0]  # what a0 is, read as written
    limit = FIRST_MAX.get(name)
    plausible = err1 is None and not (limit and first == params[0] and a0 > limit)
    how = ", ".join(counts[a0])
    if plausible and err2 is None:
        raise AttnBuildError(
            f"{where}: args={fmt(args)} is ambiguous: {a0} is this row's channel count ({how}) and also a valid "
            f"{first}. Write {fmt(args[1:])} to read it as the channel count, or {fmt([c1, *args])} to keep "
            f"{fmt(args)} as hyperparameters after the channel count"
        )
    if err2 is not None and not plausible:
        raise AttnBuildError(
            f"{err2} (read {a0} as this row's channel count, {how}; the remaining args {fmt(args[1:])} are "
            f"[{', '.join(params)}])"
        )
    if err2 is None:
        return rest[0], [f"{a0} is the channel count ({how}), dropped"] + ([rest[1]] if rest[1] else [])
    why = err2.split(": ", 1)[1]
    note = f"{a0} equals a channel count ({how}) but is read as {first}: as the channel count, the rest fails ({why})"
    return as_written[0], [note] + ([as_written[1]] if as_written[1] else [])


def resolve_row(marker: RowArgs, name: str, values: tuple) -> tuple[int, str, tuple]:
    """``RowArgs.resolve``: input width, context and hyperparameters of the row being built.

    Reads the row's args with ``read_args`` and logs one line (Ultralytics' LOGGER) if it read them other than as
    the block's own hyperparameters under its own name. ``values`` are the block's hyperparameters at their defaults,
    in signature order; the returned ones are in the same order.

    Raises:
        AttnBuildError: as ``read_args``, with the row, scale and module as written.
    """
    from ultralytics.utils import LOGGER

    row = api.parse_model_row()
    if row is None:
        raise AttnBuildError(f"{name}: a YAML row marker outside Ultralytics' parse_model")
    c1, params = row.c1, yaml_params(marker.cls)
    alias = f" ({name})" if marker.written != name else ""
    where = f"row {row.i}{f' (scale {row.scale})' if row.scale else ''} {marker.written}{alias}"
    args = _evaluate(marker.args, row.names)
    kwargs, notes = read_args(name, marker.cls, c1, args, channel_counts(marker.info, row), where)
    notes = [marker.note] * bool(marker.note) + notes
    shown = {**dict(zip(params, values)), **kwargs}
    marker.shown = ", ".join([f"c1={c1}"] + [f"{k}={v}" for k, v in shown.items() if v is not None])
    if notes and not marker.logged:  # once per row, also when its repeats build the block n times
        marker.logged = True
        LOGGER.info(f"attn-yolo: {where}, {fmt(marker.args)} read as {name}({marker.shown}): {'; '.join(notes)}")
    return c1, where, tuple(shown[p] for p in params)

