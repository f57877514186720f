"""One declaration per block: what every tool needs to know about it, stated once beside its class (``@declare``).

A block file declares its class with ``@declare(...)`` (as timm's ``@register_model``): its YAML name and aliases,
its paper, its hyperparameters (allowed and plausible values, what None means, the differing defaults of its
popular copies), the public signatures a YAML row may be written for, the gate maps heatmaps and health draw, its
export needs (minimum ONNX opset, the example args of the export matrix), how it adapts inside ``C2f``/``C3k2``, and
the helper classes it owns (weights-only loading). ``declare`` puts the ``Declaration`` on the class
(``cls.declaration``) and into ``DECLARATIONS``; every table of the tools (``attn_yolo.registry.MODULES`` /
``ALIASES`` / ``SAFE_GLOBALS``, ``attn_yolo.signatures``, ``attn_yolo.csp``, ``attn_yolo.heatmap.maps``,
``attn_yolo.export``) is a live view of ``DECLARATIONS`` (``LiveMapping``, ``LiveSequence``), so a block declared in
a new file (imported after ``attn_yolo``) is known to every tool. This module imports nothing of Ultralytics.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from attn_yolo.nn.common import is_int

ULTRALYTICS_MIN_OPSET = 9
"""Ultralytics' own minimum ONNX opset for a detect export (nearest ``Upsample``): a block's default ``min_opset``."""


# ------------------------------------------------------------------------------------------------ public signatures
@dataclass(frozen=True)
class Slot:
    """One positional arg of a public signature after the input width (``hp``, ``ch``, ``unused`` or ``fixed``).

    ``hp``: one of our hyperparameters under another name (``ours``); ``ch``: a channel count the class takes but our
    block infers (dropped; ``ok=(None,)``: None may be written); ``unused``: accepted and never used by that class
    (dropped); ``fixed``: an option whose values other than ``ok`` are a variant attn_yolo does not provide (``why``).
    """

    kind: str
    name: str  # the arg's name in the source
    ours: str | None = None  # hp: our parameter
    default: object = None  # the source's default (used to write an edit in the source's form)
    ok: tuple = ()  # fixed: the values we provide
    why: str = ""  # fixed: what another value would build
    test: Callable | None = None  # unused, fixed: the values of the arg's kind (other values: not this signature)


def is_bool(v) -> bool:
    return isinstance(v, bool)


def is_names(v) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def is_str(v) -> bool:
    return isinstance(v, str)


def positive_int(v) -> bool:
    return is_int(v) and v >= 1


def hp(name: str, ours: str, default=None) -> Slot:
    """A public arg ``name`` that is our hyperparameter ``ours`` (its default there: ``default``)."""
    return Slot("hp", name, ours, default)


def ch(name: str, none_ok: bool = False) -> Slot:
    """A channel count the source takes (``none_ok``: its default is None, which a row may write)."""
    return Slot("ch", name, ok=(None,) if none_ok else ())


def unused(name: str, default, test: Callable) -> Slot:
    """An arg the source accepts and never uses; ``test`` tells the values of its kind."""
    return Slot("unused", name, default=default, test=test)


def fixed(name: str, ok: tuple, why: str, test: Callable = is_bool) -> Slot:
    """An option of the source whose values other than ``ok`` build a variant attn_yolo does not provide (``why``)."""
    return Slot("fixed", name, default=ok[0], ok=ok, why=why, test=test)


@dataclass(frozen=True)
class Signature:
    """A public class a YAML row can be written for: its call as published, its source, its args after the width."""

    call: str
    source: str
    slots: tuple[Slot, ...]
    prefer: bool = False  # when it fits, it wins over other readings (a convention stronger than a guess)
    min_args: int = 0  # fewer args than this: not a row for this signature (they would set only unused args)


class _NotProvided:
    """A copy's default that builds a variant attn_yolo does not provide: said, never offered as an edit."""

    def __repr__(self) -> str:
        return "(not provided)"


UNPROVIDED = _NotProvided()


# ------------------------------------------------------------------------------------------------ the declaration
@dataclass(frozen=True)
class CopyDefault:
    """A popular copy's default of one hyperparameter that differs from ours.

    ``value``: the copy's default (``UNPROVIDED``: it builds a variant attn_yolo does not provide); ``who``: the
    copy's signature and source and what it does, as the log line says it (``"EMA(channels, factor=8)
    (cv-attention) uses 8 groups"``; copies with the same ``who`` share one line and one edit); ``attr``: the block
    attribute the value builds (the note is left out where ours and the copy's build the same at the row's width).
    """

    value: object
    who: str
    attr: str


@dataclass(frozen=True)
class Param:
    """One hyperparameter of a block (a constructor argument after ``c1``, in order).

    ``allowed``: the values the constructor accepts, in words; ``plausible``: ``(test, range)`` of the values its
    paper's experiments take (a reading of a row outside it loses to one inside it); ``none_means``: what None means,
    where worth saying (``"adaptive"``); ``copies``: popular copies' differing defaults; ``default``: the
    constructor's default (filled in by ``declare`` from the signature).
    """

    name: str
    allowed: str = ""
    plausible: tuple[Callable, str] | None = None
    none_means: str = ""
    copies: tuple[CopyDefault, ...] = ()
    default: object = inspect.Parameter.empty


INIT_VALUES = Param("init_values", "None (no gate) or a number in [0, 1] (0.0: identity at init)")
"""Every block's residual gate init; added by ``declare`` when a block does not declare it."""


@dataclass(frozen=True)
class Declaration:
    """Everything the tools need to know about one block. See the module docstring; fields:

    - ``name``: YAML name; ``cls``: the class; ``aliases``: other names public YAMLs use (``alias_notes``: what the
      log line says for an alias that names two blocks in the literature); ``paper``: the citation;
    - ``params``: the hyperparameters in constructor order; ``signatures``: the public signatures a row may be
      written for (ours, from the constructor, is tried first); ``kernel_alone``: the param a lone 3 or 7 sets
      (Ultralytics' ``CBAM(c1, kernel_size=7)``); ``notes``: where the authors' code differs from the paper;
    - ``gate_maps``: ``{map kind: (map function, gate submodule path, ...)}`` for heatmaps and health (the function
      a key of ``attn_yolo.heatmap.maps.GATE_MAP_FNS`` or a callable ``fn(x, *gates) -> (B, H, W)``);
      ``attention_weights``: its ``tokens_forward`` attends through ``self.attend`` (``received`` maps);
      ``attends``: the name of the method its softmax attention goes through, ``attend(q, k, v, mask=None) ->
      (output, weights or None)`` on ``(B, h, N, d)`` heads (``mask``: True where a key may be attended): mean
      ablation puts uniform attention in its place (``attn_yolo.health.mean_ablation``);
    - ``min_opset``, ``opset_ops``: the oldest ONNX opset it exports at and the ops that set it; ``example_args``:
      its YAML args on the export matrix's 32-channel P3;
    - ``inside``: ``(keywords that switch it off, width -> default keywords)`` where its defaults do not fit the
      narrow widths inside a bottleneck; ``inside_defaults``: ``{base: (keywords, who)}`` a copy's hand-written
      ``<base>_<name>`` fixes;
    - ``helpers``: classes the block owns (allow-listed for weights-only loading); ``control``: not attention (the
      ablation's ``Placebo``): no paper, heatmap or export table.
    """

    name: str
    cls: type
    paper: str
    params: tuple[Param, ...] = ()
    aliases: tuple[str, ...] = ()
    alias_notes: Mapping[str, str] = field(default_factory=dict)
    signatures: tuple[Signature, ...] = ()
    kernel_alone: str | None = None
    notes: str = ""
    gate_maps: Mapping[str, tuple] = field(default_factory=dict)
    attention_weights: bool = False
    attends: str = ""
    min_opset: int = ULTRALYTICS_MIN_OPSET
    opset_ops: str = ""
    example_args: tuple = ()
    inside: tuple[tuple[str, ...], Callable[[int], dict]] | None = None
    inside_defaults: Mapping[str, tuple[dict, str]] = field(default_factory=dict)
    helpers: tuple[type, ...] = ()
    control: bool = False

    @property
    def gates(self) -> tuple[str, ...]:
        """Paths of the gate submodules whose outputs heatmaps and health read, in order, each once."""
        return tuple(dict.fromkeys(p for _, *paths in self.gate_maps.values() for p in paths))

    def param(self, name: str) -> Param | None:
        """The ``Param`` called ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)


# ------------------------------------------------------------------------------------------------ the registry
class _Declarations(dict):
    """``DECLARATIONS``: YAML name -> ``Declaration``, in declaration order. Every change bumps ``version`` (the live
    views recompute) and tells the listeners (``attn_yolo.registry`` installs a new block with Ultralytics)."""

    version = 0
    listeners: list[Callable[[], None]] = []

    def _changed(self) -> None:
        type(self).version += 1
        for fn in list(self.listeners):
            fn()

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._changed()


DECLARATIONS: dict[str, Declaration] = _Declarations()
"""YAML name -> ``Declaration`` of every declared block (controls included, ``control=True``), in declaration order."""


def declare(name: str, paper: str = "", params: Sequence[Param] = (), **fields) -> Callable[[type], type]:
    """Class decorator: declare a block under YAML name ``name`` (fields of ``Declaration``).

    ``params`` must name the constructor's arguments after ``c1``, in order (``init_values`` may be left out);
    their defaults are taken from the constructor.

    Raises:
        TypeError: a param that is not a constructor argument, or constructor arguments not declared.
    """

    def wrap(cls: type) -> type:
        sig = inspect.signature(cls).parameters
        names = [p for p in sig if p != "c1"]
        given = list(params) + ([INIT_VALUES] if "init_values" in names and all(
            p.name != "init_values" for p in params) else [])
        if [p.name for p in given] != names:
            raise TypeError(f"@declare({name!r}): params {[p.name for p in given]} are not {cls.__name__}'s "
                            f"constructor arguments after c1, in order: {names}")
        full = tuple(Param(**{**p.__dict__, "default": sig[p.name].default}) for p in given)
        decl = Declaration(name=name, cls=cls, paper=paper, params=full, **fields)
        cls.declaration = decl
        DECLARATIONS[name] = decl
        return cls

    return wrap


def declaration_of(obj) -> Declaration | None:
    """The declaration of a block class or instance (its own class's, not a base's), or None."""
    cls = obj if isinstance(obj, type) else type(obj)
    d = cls.__dict__.get("declaration")
    return d if isinstance(d, Declaration) else None


# ------------------------------------------------------------------------------------------------ live views
class LiveMapping(Mapping):
    """A read-only mapping derived from ``DECLARATIONS`` by ``build()``, recomputed when a declaration changes."""

    def __init__(self, build: Callable[[], dict]):
        self._build, self._cache, self._version = build, {}, -1

    def _data(self) -> dict:
        if self._version != _Declarations.version:
            self._cache, self._version = self._build(), _Declarations.version
        return self._cache

    def __getitem__(self, key):
        return self._data()[key]

    def __iter__(self):
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __repr__(self) -> str:
        return repr(self._data())


class LiveSequence(Sequence):
    """A read-only sequence derived from ``DECLARATIONS`` by ``build()``, recomputed when a declaration changes."""

    def __init__(self, build: Callable[[], list]):
        self._map = LiveMapping(lambda: dict(enumerate(build())))

    def __getitem__(self, i):
        return list(self._map.values())[i]

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return repr(list(self._map.values()))


def blocks(controls: bool = True) -> dict[str, Declaration]:
    """The declarations, by YAML name; without the controls if ``controls`` is False."""
    return {k: d for k, d in DECLARATIONS.items() if controls or not d.control}


def int_in(lo: int, hi: int) -> Callable:
    """A test for an int in ``lo..hi`` (a ``Param``'s plausible range)."""
    return lambda v: is_int(v) and lo <= v <= hi
