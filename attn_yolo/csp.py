"""Attention inside Ultralytics' CSP blocks: ``C2f_<X>``, ``C3k2_<X>`` and ``SPPF_<X>``, derived for every block X.

The large public collections of YOLO attention code (objectdetection_script, ultralyticsPro, the C2f/C3k2 variants
copied from them) hand-write one class per pair and put the attention inside every bottleneck, on its residual
branch: ``y = x + X(cv2(cv1(x)))`` (``Bottleneck_<X>``), in the bottlenecks of ``C3k`` (``C3k_<X>``) and so in every
inner block of ``C3k2_<X>`` / ``C2f_<X>``. Their ``SPPF_<X>`` (most copied: ``SPPF_LSKA``, with LSKA's k = 11:
``INSIDE_DEFAULTS``) attends the concatenated pyramid before the last 1×1 conv: ``cv2(X(cat(y, m(y), m²(y),
m³(y))))``. This module follows both placements and
derives the classes instead of writing them, one per block of ``attn_yolo.registry.MODULES``:

- ``C2f_<X>`` / ``C3k2_<X>``: Ultralytics' ``C2f`` / ``C3k2`` with every ``Bottleneck`` inside (also those of ``C3k``
  at scales m/l/x, and the ``Bottleneck`` before the ``PSABlock`` of ``C3k2(..., attn=True)``) an
  ``AttnBottleneck``: ``x + X(cv2(cv1(x)))`` (``X(cv2(cv1(x)))`` without shortcut). X's width is the bottleneck's.
- ``SPPF_<X>``: ``SPPF`` whose ``cv2`` reads ``X(cat(...))``; X's width is ``cv2``'s input (2·c1).

Every submodule and state-dict key of the Ultralytics block is kept (``cv1``, ``cv2``, ``m.0.cv1``, ...); the
attention adds ``m.<j>.attn.*`` (``m.<j>.m.<k>.attn.*`` inside C3k, ``attn.*`` in SPPF). With ``init_values=0.0``
every X starts as the identity (LayerScale gate), so the block computes exactly what Ultralytics' block computes.

In a YAML the row takes the Ultralytics block's own args, and X takes its defaults, or the keywords of a trailing
mapping: ``[-1, 2, C3k2_CBAM, [256, False, 0.25]]``, ``[-1, 2, C3k2_CBAM, [256, False, 0.25, {r: 8, k: 3}]]``.
``prepare`` rewrites such rows to Ultralytics' own block before ``parse_model`` (so it applies its width scaling,
repeats and the ``c3k=True`` of scales m/l/x exactly as for ``C3k2``), and ``convert`` turns the built blocks into the
derived class afterwards (before the model's stride pass and weight init). The classes live here, bound at module
level by ``derive``, so pickled checkpoints reload (``attn_yolo.csp.C3k2_CBAM``, ``attn_yolo.csp.AttnBottleneck``).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
from dataclasses import dataclass

import torch
from torch import nn
from ultralytics.nn.modules.block import SPPF, Bottleneck, C2f, C3k2

from attn_yolo.conventions import fmt, is_own, said_once, yaml_params
from attn_yolo.nn.common import AttnBuildError, is_int
from attn_yolo.nn.declaration import LiveMapping, blocks
from attn_yolo.ultralytics_api.layers import become, relabel_layer, yaml_args

BASES: dict[str, type[nn.Module]] = {"C2f": C2f, "C3k2": C3k2, "SPPF": SPPF}
"""Ultralytics block name → class, for the blocks that get a derived ``<base>_<X>``."""

BASE_ARGS = {name: yaml_args(cls) for name, cls in BASES.items()}
"""The YAML args each base takes (after ``c1``; ``n`` of C2f / C3k2 is the row's repeats), read from Ultralytics
(``attn_yolo.ultralytics_api.layers.yaml_args``): C2f ``[c2, shortcut, g, e]``, C3k2 ``[c2, c3k, e, attn, g,
shortcut]``, SPPF ``[c2, k, n, shortcut]`` in 8.4."""


def _is_int(v, low: int = 1) -> bool:
    return is_int(v) and v >= low


_BOOL = (lambda v: isinstance(v, bool), "True or False")
_WIDTH = (lambda v: isinstance(v, str) or _is_int(v), "an int >= 1 (output channels, width-scaled by Ultralytics)")
BASE_CHECKS = {  # base → arg → (accepts the value, what is allowed), for the args BASE_ARGS names (after c1)
    "C2f": {"c2": _WIDTH, "shortcut": (_BOOL[0], "True or False (the bottlenecks' residual add)"),
            "g": (_is_int, "an int >= 1 (the bottleneck convs' groups)"),
            "e": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
                  "a number > 0 (hidden width = c2·e)")},
    "SPPF": {"c2": _WIDTH, "k": (lambda v: _is_int(v) and v % 2 == 1, "an odd int >= 1 (the max-pool kernel; "
                                 "Ultralytics' default 5)"),
             "n": (_is_int, "an int >= 1 (max-pool repeats; default 3)"),
             "shortcut": (_BOOL[0], "True or False (residual add)")},
}  # fmt: skip
BASE_CHECKS["C3k2"] = {**BASE_CHECKS["C2f"], "c3k": (_BOOL[0], "True or False (C3k blocks instead of Bottlenecks)"),
                       "attn": (_BOOL[0], "True or False (Ultralytics' own PSA attention after each block)")}


def check_base_args(where: str, cls: type, args: list) -> None:
    """Refuse a positional arg of a derived row that its Ultralytics base (C2f, C3k2, SPPF) cannot take, before the
    model is built (instead of torch's ``kernel size should be greater than zero``, or ``C3k2``'s ``attn`` silently
    taking a number as True).

    Raises:
        AttnBuildError: ``row 9 (scale n) SPPF_CBAM: k=0 is invalid; allowed: an odd int >= 1 ...``; a number where
            a bool goes says how to pass X's keywords instead (``[512, False, 0.25, {r: 8}]``).
    """
    base = cls.base.__name__
    for j, (key, v) in enumerate(zip(BASE_ARGS[base], args)):
        ok, allowed = BASE_CHECKS[base][key]
        v = _literal(v)
        if ok(v):
            continue
        hint = ""
        if ok is _BOOL[0] and isinstance(v, (int, float)):
            first = yaml_params(cls.attention)[0] if yaml_params(cls.attention) else "..."
            hint = (f"; {cls.attention.__name__}'s hyperparameters go in a trailing mapping, e.g. "
                    f"[{', '.join(map(str, args[:j]))}, {{{first}: {v}}}]")
        raise AttnBuildError(f"{where}: {key}={v!r} is invalid ({base}'s arg {j + 1} of "
                             f"[{', '.join(BASE_ARGS[base])}]); allowed: {allowed}{hint}")


class AttnBottleneck(Bottleneck):
    """Ultralytics' ``Bottleneck`` with an attention block on its residual branch: ``y = x + X(cv2(cv1(x)))``.

    ``self.attn`` is the block X (width = ``cv2``'s output channels); without shortcut ``y = X(cv2(cv1(x)))``.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.attn(self.cv2(self.cv1(x)))
        return x + y if self.add else y


class InnerAttention:
    """Mixin of every derived ``C2f_<X>`` / ``C3k2_<X>`` / ``SPPF_<X>``: ``base`` and ``attention`` (X's class).

    Built directly, the class takes the base block's args and X's keywords as ``attention={...}``, e.g.
    ``C3k2_CBAM(64, 64, 1, False, 0.25, attention={"r": 8})``.
    """

    base: type[nn.Module]
    attention: type[nn.Module]
    yaml_name: str

    def __init__(self, *args, attention: dict | None = None, **kwargs):
        self.base.__init__(self, *args, **kwargs)
        attach(self, type(self), attention or {}, type(self).yaml_name)


class AttnSPPF(InnerAttention, SPPF):
    """``SPPF`` whose last 1×1 conv reads the attended pyramid: ``cv2(X(cat(y, m(y), m²(y), m³(y))))``.

    Shapes:
        ``(B, c1, H, W) -> (B, c2, H, W)``; X sees ``(B, 2·c1, H, W)``.
    """

    base = SPPF

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(getattr(self, "n", 3)))
        y = self.cv2(self.attn(torch.cat(y, 1)))
        return y + x if getattr(self, "add", False) else y


ADAPT: LiveMapping = LiveMapping(lambda: {d.cls: d.inside for d in blocks(controls=False).values() if d.inside})
"""Blocks whose default does not fit the narrow widths inside a bottleneck (16 channels in yolo11n's first C3k2):
class → (the keywords that, given, switch the adaptation off; width → default keywords): the declarations'
``inside``."""


def _kwargs(cls: type, c: int, kwargs: dict) -> dict:
    keys, adapt = ADAPT.get(cls, ((), None))
    return {**adapt(c), **kwargs} if adapt and not set(keys) & set(kwargs) else dict(kwargs)


def attach(block: nn.Module, cls: type, kwargs: dict, where: str) -> nn.Module:
    """Turn a built Ultralytics ``block`` (C2f, C3k2 or SPPF, exactly) into ``cls`` in place: X into every bottleneck
    (or before SPPF's ``cv2``). The block's own submodules are kept; X's modules are added on the same device.

    Raises:
        AttnBuildError: X's hyperparameters do not fit a width inside the block; the message starts with ``where``.
    """
    x_cls = cls.attention
    device = next(block.parameters()).device

    def make(c: int) -> nn.Module:
        try:
            with torch.device(device):
                return x_cls(c, **_kwargs(x_cls, c, kwargs))
        except AttnBuildError as e:
            raise AttnBuildError(f"{where}: {e} (the {x_cls.__name__} width {c} inside {cls.base.__name__})") from None

    if isinstance(block, SPPF):
        block.attn = make(block.cv2.conv.in_channels)
    else:
        for b in list(block.modules()):
            if type(b) is Bottleneck:
                become(b, AttnBottleneck)
                b.attn = make(b.cv2.conv.out_channels)
    return become(block, cls)


def derive(blocks: dict[str, type[nn.Module]]) -> dict[str, type[nn.Module]]:
    """Make ``<base>_<X>`` for every base in ``BASES`` and every block ``X`` of ``blocks`` (``MODULES``): classes
    bound in this module under that name (the checkpoint path ``attn_yolo.csp.C3k2_CBAM``). Idempotent.

    Returns:
        ``{derived name: class}``.
    """
    out = {}
    for base_name, base in BASES.items():
        for x_name, x_cls in blocks.items():
            name = f"{base_name}_{x_name}"
            cls = globals().get(name)
            if cls is None or cls.attention is not x_cls:
                bases = (AttnSPPF,) if base is SPPF else (InnerAttention, base)
                place = (f"before cv2: cv2({x_name}(cat(pyramid)))" if base is SPPF
                         else f"inside every bottleneck: x + {x_name}(cv2(cv1(x)))")
                doc = (f"Ultralytics' {base_name} with {x_name} {place}.\n\nYAML: {base_name}'s args "
                       f"[{', '.join(BASE_ARGS[base_name])}], then optionally {{{x_name} keywords}}. {x_name}: "
                       f"{(x_cls.__doc__ or '').strip().splitlines()[0]}")
                cls = type(name, bases, {"__module__": __name__, "__qualname__": name, "__doc__": doc,
                                         "base": base, "attention": x_cls, "yaml_name": name})
                globals()[name] = cls
            out[name] = cls
    return out


INSIDE_DEFAULTS: LiveMapping = LiveMapping(lambda: {
    (base, n): v for n, d in blocks(controls=False).items() for base, v in d.inside_defaults.items()})
"""``(base, X) -> (X's keywords the copies' hand-written class fixes, who)``: a row that leaves them out gets X's own
defaults and its log line the edit for the copy's (the rule of ``attn_yolo.signatures.DEFAULTS``); the declarations'
``inside_defaults``."""


@dataclass
class Inner:
    """A YAML row that ``prepare`` rewrote to its Ultralytics base: the derived class, X's keywords, error context,
    the base's args as written."""

    cls: type
    kwargs: dict
    where: str
    args: list
    own: bool = False  # the model dict carries the project's own marker (conventions.OWN_KEY): no copy notes


def inside_note(spec: Inner) -> str:
    """``; k left out: ...: write [...] for that`` where the row leaves out keywords an ``INSIDE_DEFAULTS`` copy fixes,
    once per derived block and copy in a process (``conventions.said_once``); empty otherwise, and in the project's own
    model dicts (``spec.own``)."""
    copy, who = INSIDE_DEFAULTS.get((spec.cls.base.__name__, spec.cls.attention.__name__), ({}, ""))
    left = {k: v for k, v in copy.items() if k not in spec.kwargs}
    if not left or spec.own or not said_once((spec.cls.__name__, who)):
        return ""
    params = inspect.signature(spec.cls.attention).parameters
    ours = " and ".join(f"{spec.cls.attention.__name__}'s {k}={params[k].default!r}" for k in left)
    mapping = "{" + ", ".join(f"{k}: {v!r}" for k, v in {**spec.kwargs, **left}.items()) + "}"
    edit = f"[{', '.join(map(str, spec.args))}{', ' if spec.args else ''}{mapping}]"
    return f"; {', '.join(left)} left out: {ours}; {who}: write {edit} for that"



def split_args(args: list) -> tuple[list, dict]:
    """A derived row's args: ``(base block args, X keywords)``; the keywords are a trailing mapping, if any."""
    if args and isinstance(args[-1], dict):
        return list(args[:-1]), dict(args[-1])
    return list(args), {}


def _literal(v):
    if isinstance(v, str):
        with contextlib.suppress(ValueError, SyntaxError):
            return ast.literal_eval(v)  # "None" as PyYAML reads Ultralytics' rows
    return v


def prepare(d: dict, name_of) -> dict[int, Inner]:
    """Rewrite every derived row of model dict ``d`` (edited in place) to its Ultralytics base block.

    ``name_of(written)`` gives the derived name a YAML module name means (``C3k2_CBAM``, or via an alias), or None.

    Returns:
        ``{row index: Inner}`` for ``convert``.

    Raises:
        AttnBuildError: more args than the base takes, a base arg it cannot take (``check_base_args``), X keywords that
            are not a mapping of X's hyperparameters.
    """
    rows, out = list(d.get("backbone") or []) + list(d.get("head") or []), {}
    scale = d.get("scale") or next(iter(d.get("scales") or {}), None)
    for i, row in enumerate(rows):
        name = name_of(row[2])
        if not name:
            continue
        cls = globals()[name]
        base = cls.base.__name__
        where = f"row {i}{f' (scale {scale})' if scale else ''} {row[2]}"
        args, kwargs = split_args(row[3])
        params, allowed = yaml_params(cls.attention), BASE_ARGS[base]
        x_name = cls.attention.__name__
        if len(args) > len(allowed) or any(isinstance(a, dict) for a in args):
            raise AttnBuildError(
                f"{where}: args={fmt(row[3])} has {len(args)} positional values; {row[2]} takes {base}'s args "
                f"[{', '.join(allowed)}], then optionally one mapping of {x_name}'s keywords "
                f"({', '.join(params)}), e.g. [{args[0] if args else 256}, {{{params[0]}: ...}}]"
            )
        check_base_args(where, cls, args)
        bad = [k for k in kwargs if k not in params]
        if bad:
            raise AttnBuildError(f"{where}: {x_name} has no hyperparameter {bad[0]!r}; allowed keywords: "
                                 f"{', '.join(params)}")
        row[2], row[3] = base, args
        out[i] = Inner(cls, {k: _literal(v) for k, v in kwargs.items()}, where, args, is_own(d))
    return out


def convert(layers: nn.Module, inner: dict[int, Inner], verbose: bool = False) -> None:
    """Turn the layers ``parse_model`` built for the rows ``prepare`` rewrote into their derived classes, in place
    (layer table ``type`` and ``np`` updated; one log line per row when ``verbose``).

    Raises:
        AttnBuildError: X does not build at a width inside the block; the message names the row.
    """
    from ultralytics.utils import LOGGER

    for i, spec in inner.items():
        layer = layers[i]
        for block in (layer if type(layer) is nn.Sequential else [layer]):
            attach(block, spec.cls, spec.kwargs, spec.where)
        added = relabel_layer(layer, spec.cls)
        note = inside_note(spec)
        if verbose or note:
            x = spec.cls.attention.__name__
            kw = ", ".join(f"{k}={v}" for k, v in spec.kwargs.items())
            LOGGER.info(f"attn-yolo: {spec.where}: {x}({kw or 'defaults'}) inside {spec.cls.base.__name__} "
                        f"(+{added} params){note}")
