"""How a YAML row's block gets its input width and args: its row marker reads them by the public signatures they fit.

The one path: ``attn_yolo.registry``'s wrapped ``parse_model`` puts a ``RowArgs`` marker in place of an attention
row's args and names the row's YAML builder (``attn_yolo.registry.yaml_builder``); ``parse_model`` calls the builder
with the marker, and the builder calls ``resolve_row``: it takes the row's input width, index and scale from
``parse_model`` (``attn_yolo.ultralytics_api.parse_model_row``), reads the args by the rules below, with one log
line, and the builder builds the block from plain values (``SE(c1, r=16)``). Nothing is set at import.

Public YAMLs that put attention into yolov8 / yolo11 write a block's args for the class their author copied. Each row
is read as its author meant, with one log line that names the row and says how it was read, or refused with the edit:

1. **Channel count first** (``CBAM, [1024]``, ``SE, [1024, 16]``, ``ECAAttention, [256]``): a leading int that is one
   of the row's channel counts may be the channel count, dropped. The row's channel counts are its input width before
   width scaling (the source row's own ``args[0]``, or the sum over a Concat's inputs, as written in the YAML) and as
   built at every scale of the YAML (so ``[256]`` written for scale n also reads at scale x). The input width itself
   always comes from the layer the row reads.
2. **Public signatures** (``attn_yolo.signatures``): the args are mapped onto ours by each signature in the table as
   well as our own (``attn-yolo modules``), each with and without a leading channel count. A reading counts if the
   block builds so; one that only drops args as unused counts only if nothing else does; implausible values
   (``PLAUSIBLE``) lose to plausible ones; Ultralytics' ``CBAM(c1, kernel_size=7)`` wins where it fits (``CBAM, [7]``
   is ``k=7``). Readings that build the same block agree; if they do not, the row is refused with an edit for each
   (e.g. ``SE, [32]`` on a 32-channel layer). A row that sets a variant we do not provide (``no_spatial=True``) is
   refused, naming it, also when the rest of the row fits no signature (``CBAM, [16, 7, True]``).
3. **Defaults** (``DEFAULTS``, the declarations' copies): where the most-copied code's default differs from the
   paper's, a row that leaves the hyperparameter out gets the paper's value and a log note with the edit for the
   other, once per block and copy in a process (``said_once``), and never in a model dict that carries the marker
   ``OWN_KEY: OWN_VALUE`` (``attn_yolo_args: own``): the project's own YAMLs (``models/*.yaml``) and every model
   ``attn-yolo insert`` writes (insert specs included) carry it, since their rows write the args they mean (a plain
   ``ECA, []`` there is the paper's adaptive k, not a copy's k = 3).

``RowArgs`` is the marker ``attn_yolo.registry`` puts in place of an attention row's args; ``resolve_row`` reads it
when the row's builder is called inside ``parse_model``.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import logging
from dataclasses import dataclass

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.nn.common import AttnBuildError, is_int
from attn_yolo.nn.declaration import LiveMapping, blocks
from attn_yolo.row_readings import Reading, all_readings, build_error, choose, full_hparams, yaml_params
from attn_yolo.signatures import DEFAULTS, UNPROVIDED, signatures

KERNEL_ALONE: LiveMapping = LiveMapping(lambda: {n: d.kernel_alone for n, d in blocks().items() if d.kernel_alone})
"""Blocks whose lone arg 3 or 7 is the spatial kernel (Ultralytics' ``CBAM(c1, kernel_size=7)``): name -> param
(the declarations' ``kernel_alone``)."""

UNSCALED = "before width scaling"
NONE_MEANS: LiveMapping = LiveMapping(
    lambda: {(n, p.name): p.none_means for n, d in blocks().items() for p in d.params if p.none_means}
)
"""What a hyperparameter left at None means, where it is worth saying (``attn-yolo modules``, insert's printout):
the declarations' ``Param.none_means``."""


OWN_KEY, OWN_VALUE = "attn_yolo_args", "own"
"""A model dict's top-level marker (``attn_yolo_args: own``): its rows' args are attn-yolo's own, written as meant, so
no compatibility note is said for a hyperparameter they leave out (the copies' defaults, ``DEFAULTS``)."""
_SAID: set = set()  # the compatibility notes said in this process, (block, copy), and the rows read: ("row", ...)


def said_once(key: tuple) -> bool:
    """True the first time ``key`` (``(block, copy)``) is asked in this process: a compatibility note is said once per
    block and copy, not once per row and build (``forget_said`` starts over)."""
    if key in _SAID:
        return False
    _SAID.add(key)
    return True


def forget_said() -> None:
    """Forget the compatibility notes said so far (each is said again once)."""
    _SAID.clear()


def is_own(d: dict) -> bool:
    """Whether model dict ``d`` carries the marker of the project's own rows (``OWN_KEY: OWN_VALUE``)."""
    return isinstance(d, dict) and d.get(OWN_KEY) == OWN_VALUE


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
    own: bool = False  # the dict carries OWN_KEY: its rows' args are the project's own (no compatibility notes)

    @classmethod
    def of(cls, d: dict, ch: int, attention: set) -> YamlInfo:
        scales = {s: (v[1], v[2]) for s, v in (d.get("scales") or {}).items()}
        scales = scales or {None: (d.get("width_multiple", 1.0), float("inf"))}
        return cls(list(d.get("backbone") or []) + list(d.get("head") or []), scales, ch, attention, is_own(d))


class RowArgs:
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


def _canonical(cls: type, kwargs: dict, length: int | None = None) -> list:
    """``kwargs`` as a row in our signature, positional, defaults filling gaps (to the last given, or ``length``
    args if that is longer)."""
    params = [p for p in inspect.signature(cls).parameters.values() if p.name != "c1"]
    names = [p.name for p in params]
    n = max([names.index(k) + 1 for k in kwargs] + [length or 0])
    return [kwargs.get(p.name, p.default) for p in params[:n]]


def _edit(name: str, cls: type, c1: int, kwargs: dict, counts: dict, where: str) -> list | None:
    """Args that read as ``kwargs`` and nothing else: our own form, the shortest that does (defaults written out to
    tell it from another signature's reading), or a public signature's form."""
    want = full_hparams(cls, kwargs)
    shortest = len(_canonical(cls, kwargs))
    candidates = [_canonical(cls, kwargs, n) for n in range(shortest, len(yaml_params(cls)) + 1)]
    for sig in signatures(name):
        inv = {s.ours: s for s in sig.slots if s.kind == "hp"}
        if set(kwargs) <= set(inv):
            form = [kwargs.get(s.ours, s.default) if s.kind == "hp" else c1 if s.kind == "ch" else s.default
                    for s in sig.slots]
            candidates.append(form)
    for cand in candidates:
        groups = choose(all_readings(name, cls, c1, cand, counts, where), cls)
        if len(groups) == 1 and full_hparams(cls, groups[0][0].kwargs) == want:
            return cand
    return None


def _describe(r: Reading, name: str, a0) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in r.kwargs.items()) or "its defaults"
    by = f"for {r.sig.call} ({r.sig.source})" if r.sig else f"as attn_yolo's {name}"
    return f"{by}{f' after the channel count {a0}' if r.prefix else ''}: {shown}"


def _representative(group: list[Reading], name: str, written: str) -> Reading:
    """The reading a log line names, of readings that agree: ours as written under our own name; else the public
    signature whose class name the row uses; else ours as written; else the first."""
    own = [r for r in group if r.sig is None and not r.prefix] + [r for r in group if r.sig is None and r.prefix]
    named = [r for r in group if r.sig and r.sig.call.split("(")[0] == written]
    return ([*own, *named] if written == name else [*named, *own] or group)[0] if own or named else group[0]


def read_args(name: str, cls: type, c1: int, args: list, counts: dict[int, list[str]], where: str, written: str = "",
              copies: bool = True):
    """The hyperparameters a row's ``args`` mean for block ``name`` at input width ``c1``: ``(kwargs, notes)``.

    ``counts`` are the row's channel counts (``channel_counts``); ``notes`` say how the args were read, empty when
    read as written by our own signature. ``copies``: add the compatibility notes of the copies' differing defaults
    (``_default_notes``), each once per block and copy in this process (``said_once``); False: none (the project's
    own rows). Reads the args by every signature they fit (``attn_yolo.signatures``),
    each as written and with a leading channel count dropped: readings that do not build, set a variant attn_yolo
    does not provide, or drop every arg as unused do not count; implausible values (``PLAUSIBLE``) lose to plausible
    ones; readings that build the same block agree.

    Raises:
        AttnBuildError: no reading builds (the message says why, or names the variant not provided), or readings
            that build different blocks fit (ambiguous; the message gives an edit for each).
    """
    params, a0 = yaml_params(cls), args[0] if args else None
    readings = all_readings(name, cls, c1, args, counts, where)
    groups = choose(readings, cls)
    if not groups:
        raise AttnBuildError(_failure(name, params, args, counts, readings, where, c1, cls))
    if len(groups) > 1:
        raise AttnBuildError(_ambiguity(name, cls, c1, args, counts, groups, where))
    r = _representative(groups[0], name, written)
    notes = list(r.notes)
    if r.sig is not None:
        notes.insert(0, f"by the signature {r.sig.call} ({r.sig.source})")
    consumed = r.sig is not None and r.sig.slots and r.sig.slots[0].kind == "ch"  # a0 read as the source's count
    if not r.prefix and not consumed and is_int(a0) and a0 in counts:
        first = next(iter(r.kwargs), params[0])
        prefixed = [x for x in readings if x.prefix and x.error]
        why = f": as the channel count, the rest fails ({prefixed[0].error.split(': ', 1)[1]})" if prefixed else ""
        notes.append(f"{a0} equals a channel count ({', '.join(counts[a0])}) but is read as {first}{why}")
    if copies:
        said = _default_notes(name, cls, c1, r.kwargs, counts, where)
        notes += [note for who, note in said if said_once((name, who))]
    others = [x for x in readings if not x.evidence and x.error is None and x.refusal is None] if not r.sig else []
    for x in others[:1]:
        if full_hparams(cls, x.kwargs) != full_hparams(cls, r.kwargs):
            edit = _edit(name, cls, c1, x.kwargs, counts, where)
            notes.append(f"for {x.sig.call} ({x.sig.source}) {fmt(args)} would be unused args, defaults kept"
                         + (f": write {fmt(edit)} for that" if edit is not None else ""))
    return r.kwargs, notes


def _shown(v) -> str:
    return str(list(v) if isinstance(v, tuple) else v)


def _default_notes(name: str, cls: type, c1: int, kwargs: dict, counts: dict, where: str) -> list[tuple[str, str]]:
    """The ``DEFAULTS`` notes of a row read as ``kwargs``, ``(who, note)``: one per copy (``who``) whose defaults
    differ from ours in hyperparameters the row leaves out and build another block at ``c1`` (its ``attribute``s
    differ): our values as built, who uses what, and the edit that builds the copy's values (none where they do not
    build at ``c1``)."""
    left: dict[str, dict] = {}
    for (block, p), (value, who, attr) in DEFAULTS.items():
        if block == name and p not in kwargs:
            left.setdefault(who, {})[p] = (value, attr)
    if not left:
        return []
    with torch.device("meta"):
        ours = cls(c1, **kwargs)
    notes = []
    for who, entries in left.items():
        theirs = {p: v for p, (v, _) in entries.items()}
        if any(v is UNPROVIDED for v in theirs.values()):
            shown = " and ".join(f"{p}={_shown(getattr(ours, attr))}" for p, (_, attr) in entries.items())
            notes.append((who, f"{', '.join(entries)} left out: the paper's {shown}; {who}, which attn_yolo does not "
                          "provide"))
            continue
        builds = build_error(cls, name, c1, {**kwargs, **theirs}, where) is None
        if builds:
            with torch.device("meta"):
                other = cls(c1, **kwargs, **theirs)
            entries = {p: e for p, e in entries.items() if getattr(other, e[1]) != getattr(ours, e[1])}
        if not entries:
            continue
        hows = []
        for p, (_, attr) in entries.items():
            v = _shown(getattr(ours, attr))
            if (name, p) in NONE_MEANS:
                hows.append(f"{NONE_MEANS[(name, p)]} {p}, {v} at C={c1}")
            else:
                hows.append(f"{p}={_shown(getattr(ours, p))}" + (f" ({attr} {v} at C={c1})" if attr != p else ""))
        edit = _edit(name, cls, c1, {**kwargs, **{p: theirs[p] for p in entries}}, counts, where) if builds else None
        tail = f": write {fmt(edit)} for that" if edit else "" if builds else f" (which does not build at C={c1})"
        notes.append((who, f"{', '.join(entries)} left out: the paper's {' and '.join(hows)}; {who}{tail}"))
    return notes


def _variant_asked(name, cls, c1, args, counts, where) -> str | None:
    """The refusal of a row that no signature reads whole but whose arg at some position is a public signature's
    option for a variant attn_yolo does not provide (``CBAM, [16, 7, True]``: ``True`` third is the CBAM authors'
    ``no_spatial``), with the edit that drops it where the rest reads as one block; None if no arg is such an option.
    """
    for sig in signatures(name):
        for skip in [0] + [1] * (bool(args) and is_int(args[0]) and args[0] in counts):
            if len(args) - skip > len(sig.slots):
                continue
            for j, (slot, v) in enumerate(zip(sig.slots, args[skip:])):
                if slot.kind != "fixed" or not slot.test(v) or v in slot.ok:
                    continue
                rest = args[: skip + j] + args[skip + j + 1 :]
                groups = choose(all_readings(name, cls, c1, rest, counts, where), cls)
                edit = f"; write {fmt(rest)} for attn_yolo's {name} without it" if len(groups) == 1 else ""
                return (f"{where}: args={fmt(args)}: {v!r} at position {skip + j + 1} is {slot.name}={v!r} of "
                        f"{sig.call} ({sig.source}), {slot.why}{edit}")
    return None


def _failure(name, params, args, counts, readings, where, c1, cls) -> str:
    """Why no reading counts: a variant not provided (read whole by a signature, or asked at its position), or ours'
    error (as written, or after the channel count), with the edit for a signature that would drop every arg as
    unused."""
    a0 = args[0] if args else None
    refusal = next((r for r in readings if r.refusal), None)
    if refusal is not None:
        edit = _edit(name, cls, c1, refusal.kwargs, counts, where)
        return (f"{where}: args={fmt(args)} {_describe(refusal, name, a0).split(':')[0]}: {refusal.refusal}"
                + (f"; write {fmt(edit)} for attn_yolo's {name}" if edit is not None else ""))
    if (variant := _variant_asked(name, cls, c1, args, counts, where)) is not None:
        return variant
    own = [r for r in readings if r.sig is None]
    as_written = next((r for r in own if not r.prefix), None)
    err1 = as_written.error if as_written else (
        f"{where}: args={fmt(args)} has {len(args)} values; {name} takes at most {len(params)}: "
        f"[{', '.join(params)}] after an optional leading channel count, and {a0!r} is not one of this row's "
        f"({describe(counts)})"
    )
    if is_int(a0) and a0 in counts:
        prefixed = next((r for r in own if r.prefix), None)
        err2 = prefixed.error if prefixed else f"{where}: args={fmt(args)} has too many values"
        msg = (f"{err2} (read {a0} as this row's channel count, {', '.join(counts[a0])}; the remaining args "
               f"{fmt(args[1:])} are [{', '.join(params)}])")
    else:
        msg = err1
        if is_int(a0) and a0 >= 16 and f" {params[0]}={a0!r} is invalid" in err1:
            msg += (f". If {a0} is meant as the channel count, it is not one of this row's ({describe(counts)}): "
                    f"write one of those, or drop it: {fmt(args[1:])}")
    unused = next((r for r in readings if not r.evidence and r.error is None and r.refusal is None), None)
    if unused is not None:
        msg += (f". For {unused.sig.call} ({unused.sig.source}) {fmt(args)} would be unused args: write "
                f"{fmt(_canonical(cls, unused.kwargs))} for that")
    return msg


def _ambiguity(name, cls, c1, args, counts, groups, where) -> str:
    """The refusal of a row whose readings build different blocks, with an edit for each."""
    a0 = args[0]
    firsts = [g[0] for g in groups]
    if len(firsts) == 2 and all(r.sig is None for r in firsts) and {r.prefix for r in firsts} == {False, True}:
        as_written = next(r for r in firsts if not r.prefix)
        first = next(iter(as_written.kwargs), yaml_params(cls)[0])
        return (f"{where}: args={fmt(args)} is ambiguous: {a0} is this row's channel count "
                f"({', '.join(counts[a0])}) and also a valid {first}. Write {fmt(args[1:])} to read it as the "
                f"channel count, or {fmt([c1, *args])} to keep {fmt(args)} as hyperparameters after the channel count")
    parts, edits = [], []
    for r in firsts[:3]:
        parts.append(_describe(r, name, a0))
        edit = _edit(name, cls, c1, r.kwargs, counts, where)
        what = ", ".join(f"{k}={v!r}" for k, v in r.kwargs.items()) or "the defaults"
        edits.append(f"{fmt(edit)} for {what}" if edit is not None else f"our own args for {what}")
    return f"{where}: args={fmt(args)} is ambiguous: read {'; or '.join(parts)}. Write " + " or ".join(edits)


def resolve_row(marker: RowArgs) -> tuple[int, str, dict]:
    """Input width, context (``"row 5 (scale n) SE"``) and hyperparameters (keywords) of the row being built.

    Reads the row's args with ``read_args`` and logs one line (Ultralytics' LOGGER) if it read them other than as
    the block's own hyperparameters under its own name: once per row and process (not per repeat, nor per build of
    the same YAML: a trainer builds it again), with the compatibility notes not yet said in this process, none for a
    model dict with the own marker (``OWN_KEY``).

    Raises:
        AttnBuildError: as ``read_args``, with the row, scale and module as written.
    """
    from ultralytics.utils import LOGGER

    name, row = marker.name, api.parse_model_row()
    if row is None:
        raise AttnBuildError(f"{name}: a YAML row marker outside Ultralytics' parse_model")
    c1, params = row.c1, yaml_params(marker.cls)
    alias = f" ({name})" if marker.written != name else ""
    where = f"row {row.i}{f' (scale {row.scale})' if row.scale else ''} {marker.written}{alias}"
    args = _evaluate(marker.args, row.names)
    heard = LOGGER.isEnabledFor(logging.INFO)  # a note said to a silenced logger would count as said
    kwargs, notes = read_args(name, marker.cls, c1, args, channel_counts(marker.info, row), where, marker.written,
                              copies=heard and not marker.info.own and not marker.logged)
    notes = [marker.note] * bool(marker.note) + notes
    defaults = {p: v.default for p, v in inspect.signature(marker.cls).parameters.items() if p in params}
    shown = {**defaults, **kwargs}
    marker.shown = ", ".join([f"c1={c1}"] + [f"{k}={v}" for k, v in shown.items() if v is not None])
    if notes and not marker.logged:  # once per row, also when its repeats build the block n times
        marker.logged = True
        if heard and said_once(("row", where, fmt(marker.args), marker.shown)):  # and once per process: a trainer
            LOGGER.info(f"attn-yolo: {where}, {fmt(marker.args)} read as {name}({marker.shown}): {'; '.join(notes)}")
    return c1, where, kwargs

