"""Where a YAML module name is resolved: the attention registry and its registration with Ultralytics.

The registry's tables (``MODULES``, ``ALIASES``, ``SAFE_GLOBALS``, ...) are live views of the blocks' declarations
(``DECLARATIONS``, ``attn_yolo.nn.declaration``): a block declared after ``import attn_yolo`` is registered at once.

``register()`` (run by ``import attn_yolo``) does four things, each idempotent and each undone by ``unregister()``,
all through ``attn_yolo.ultralytics_api`` (the one place that touches Ultralytics internals):

1. puts every class of ``BLOCKS`` into the namespace of ``ultralytics.nn.tasks``, where ``parse_model`` looks YAML
   names up (``globals()[name]``); an Ultralytics global of the same name is set aside (with a warning) and put back
   by ``unregister()``;
2. wraps ``ultralytics.nn.tasks.parse_model`` (and ``_initialize_yolo_model``, which indexes the rows first) so
   that (a) every row is checked first (``check_yaml_modules``): an unknown name raises ``UnknownModuleError``
   naming the row, the name and the closest layer or block (or that attn_yolo does not provide it), a malformed
   from / repeats / args ``ModelYamlError``, instead of a bare ``KeyError`` or ``IndexError``; (b) each attention
   row (its name, or an alias in ``ALIASES``) gets its block's class and one marker (``attn_yolo.conventions.RowArgs``)
   in place of its args and its block's YAML builder (``yaml_builder``) in place of its name, so the block takes
   its input width from the layer it reads and its args are read by the conventions of public YAMLs
   (``attn_yolo.conventions``), then is built from plain values; (c) each ``C2f_<X>`` / ``C3k2_<X>`` / ``SPPF_<X>`` row
   (``CSP_BLOCKS``) is built as Ultralytics' own block and then given X inside (``attn_yolo.csp``); and wraps the
   ``guess_model_task`` of ``ultralytics.engine.model``, which ``YOLO(yaml)`` calls before building, so those
   checks come first there too (an attention row after Detect would otherwise end in Ultralytics' ``'None' task``
   error);
3. allow-lists the classes for weights-only loading (``ULTRALYTICS_SAFE_LOAD=1``, ``torch.serialization``);
   ``unregister()`` removes those it added, keeping any added before or by others;
4. adds a callback to Ultralytics' default callbacks. Multi-GPU training pickles the trainer's callbacks into the
   DDP worker state (``ultralytics.utils.dist.generate_ddp_file``); unpickling this function imports ``attn_yolo`` in
   each worker, so workers can build YAMLs naming the blocks even when the trainer holds a YAML path, not a model.
"""

from __future__ import annotations

import copy
import functools
import re

import torch

from attn_yolo import csp
from attn_yolo import ultralytics_api as api
from attn_yolo.conventions import RowArgs, YamlInfo, fmt, resolve_row, yaml_params
from attn_yolo.nn import DECLARATIONS, LayerScale
from attn_yolo.nn.common import AttnBuildError, is_int
from attn_yolo.nn.declaration import Declaration, LiveMapping, LiveSequence, _Declarations, blocks
from attn_yolo.signatures import max_args
from attn_yolo.text import closest

__all__ = ["ALIASES", "ALIAS_NOTES", "BLOCKS", "CONTROLS", "CSP_BLOCKS", "DECLARATIONS", "MODULES", "SAFE_GLOBALS"]

MODULES: LiveMapping = LiveMapping(lambda: {n: d.cls for n, d in blocks(controls=False).items()})
"""YAML name → attention block class (the declarations that are not controls)."""

CONTROLS: LiveMapping = LiveMapping(lambda: {n: d.cls for n, d in DECLARATIONS.items() if d.control})
"""YAML name → control block class: blocks that are not attention but are inserted, built and carried like the
blocks (``Placebo``, the capacity control of an ablation). Not in ``MODULES``: no paper, no heatmap, no export table."""

BLOCKS: LiveMapping = LiveMapping(lambda: {n: d.cls for n, d in DECLARATIONS.items()})
"""Every block a row can name and ``attn_yolo.insert`` can insert: ``MODULES`` and ``CONTROLS``."""

ALIASES: LiveMapping = LiveMapping(lambda: {a: n for n, d in DECLARATIONS.items() for a in d.aliases})
"""Other names public YAMLs use for a block → its name in ``MODULES`` (the declarations' ``aliases``). An alias builds
the same class (checkpoints, heatmaps, export and insert see one block); a row naming it logs one line saying so."""

ALIAS_NOTES: LiveMapping = LiveMapping(lambda: {a: t for d in DECLARATIONS.values() for a, t in d.alias_notes.items()})
"""For a short alias that names two blocks in the literature: what the log line says about the meaning chosen."""

NOT_PROVIDED = (
    "BAM", "BAMBlock", "GC", "GCNet", "GCBlock", "GlobalContext",
    "ContextBlock", "CrissCrossAttention", "CCNet", "DANet", "DAModule",
    "PolarizedSelfAttention", "ParNetAttention", "S2Attention", "LSKBlock", "ACmix", "CoTAttention", "SGE",
    "SpatialGroupEnhance", "DoubleAttention", "A2Attention", "ExternalAttention", "OutlookAttention",
    "ResidualAttention", "EffectiveSE", "ESE", "SCSA", "CPCA", "DAT", "DeformableAttention", "AFF",
    "iAFF", "SplitAttention", "ChannelAttention", "ChannelAttentionModule", "NonLocal", "NonLocalBlock",
    "GatherExcite", "SRM", "FcaNet", "FcaLayer", "MultiSpectralAttention", "scSE", "SCSE", "AxialAttention",
    "LSKAttention", "LSKA_Attention",  # LSKNet's selective kernel; VAN's block around LSKA (proj, GELU, shortcut)
)  # fmt: skip
"""Attention blocks of the literature that attn_yolo does not provide: a YAML naming one is told so, never pointed to
a different block by a "did you mean" hint."""

CSP_BLOCKS: LiveMapping = LiveMapping(lambda: csp.derive(MODULES))
"""``C2f_<X>``, ``C3k2_<X>``, ``SPPF_<X>`` for every block X of ``MODULES`` (``attn_yolo.csp``): YAML name → class."""

SAFE_GLOBALS: LiveSequence = LiveSequence(lambda: [
    *BLOCKS.values(), *dict.fromkeys(h for d in DECLARATIONS.values() for h in d.helpers), LayerScale,
    *CSP_BLOCKS.values(), csp.AttnBottleneck])
"""The classes a weights-only load of a checkpoint may meet: the blocks, the helpers they declare, ``LayerScale``,
the derived ``C2f_<X>`` / ``C3k2_<X>`` / ``SPPF_<X>`` and ``AttnBottleneck``."""


def yaml_builder(decl: Declaration) -> type:
    """The class ``parse_model`` calls for a row of ``decl``'s block: called with the row's marker (``RowArgs``), it
    reads the row (``attn_yolo.conventions.resolve_row``: input width, public signatures, defaults) and returns the
    block built from plain values, ``decl.cls(c1, **kwargs)``. It prints as the block's class in Ultralytics' layer
    table (same ``__module__`` / ``__qualname__``) and is an ``nn.Module`` subclass (restricted loading accepts it);
    the object it returns is the block itself (checkpoints pickle ``attn_yolo.nn.<file>.<Class>``).

    Raises (when called):
        AttnBuildError: as ``resolve_row``, naming the row, scale, value and allowed range.
    """

    def __new__(cls, marker: RowArgs):
        c1, where, kwargs = resolve_row(marker)
        try:
            return decl.cls(c1, **kwargs)
        except AttnBuildError as e:  # the readings were built on the meta device; the message gets the row
            msg = str(e)
            own = f"{decl.cls.__name__}:"
            raise AttnBuildError(where + msg[len(own) - 1 :] if msg.startswith(own) else f"{where}: {msg}") from None

    doc = f"YAML builder of {decl.name}: reads the row, returns {decl.cls.__qualname__}(c1, **hyperparameters)."
    return type(decl.cls.__name__, (torch.nn.Module,), {"__new__": __new__, "__module__": decl.cls.__module__,
                                                       "__qualname__": decl.cls.__qualname__, "__doc__": doc})


BUILDERS: LiveMapping = LiveMapping(lambda: {f"attn_yolo:{n}": yaml_builder(d) for n, d in DECLARATIONS.items()})
"""``parse_model`` name → YAML builder of each block (``yaml_builder``): an attention row's module is renamed to its
builder's name by the wrapped ``parse_model`` (the block's own name keeps resolving to its class in
``ultralytics.nn.tasks``)."""


HEAD_RE = re.compile(r"Detect|Segment|Pose|OBB|Classify|RTDETRDecoder")  # output heads (as guess_model_task reads)


class UnknownModuleError(KeyError):
    """A model YAML names a module that neither Ultralytics nor attn_yolo defines. A ``KeyError`` for compatibility."""

    def __str__(self) -> str:  # KeyError would print the message repr-quoted
        return str(self.args[0])


class ModelYamlError(ValueError):
    """A model YAML that ``parse_model`` cannot read: no rows, or a row's from / repeats / args malformed."""


def _tasks_names() -> dict:
    """Ultralytics' own names in ``ultralytics.nn.tasks`` (where ``parse_model`` looks YAML names up), without ours."""
    return api.ultralytics_globals()


def canonical(name) -> str | None:
    """The ``BLOCKS`` name of a YAML module name (itself or an alias), or None if it names no block.

    An alias never shadows an Ultralytics module of the same name.
    """
    if name in BLOCKS:
        return name
    return ALIASES[name] if name in ALIASES and name not in _tasks_names() else None


def csp_name(name) -> str | None:
    """The ``CSP_BLOCKS`` name of a YAML module name (``C3k2_CBAM``; with an alias of X: ``C3k2_CA``), or None."""
    if name in CSP_BLOCKS:
        return name
    base, sep, x = str(name).partition("_")
    derived = f"{base}_{ALIASES.get(x)}"
    return derived if sep and derived in CSP_BLOCKS and name not in _tasks_names() else None


def _known(name: str) -> bool:
    if name.startswith("nn."):
        return hasattr(torch.nn, name[3:])
    if name.startswith("torchvision.ops."):
        import torchvision

        return hasattr(torchvision.ops, name[16:])
    return canonical(name) is not None or csp_name(name) is not None or name in _tasks_names()


def _layers() -> list[str]:
    """YAML names of the layers a row can name besides the attention blocks: Ultralytics' and ``nn.<torch.nn>``."""
    from ultralytics.nn.tasks import BaseModel

    def layer(v) -> bool:
        return isinstance(v, type) and issubclass(v, torch.nn.Module) and not issubclass(v, BaseModel)

    own = [k for k, v in _tasks_names().items() if k[0].isupper() and layer(v)]
    return own + [f"nn.{k}" for k, v in vars(torch.nn).items() if k[0].isupper() and layer(v)]


def suggest(name: str) -> str | None:
    """The name a misspelt module ``name`` most likely meant: attention blocks first, then layers; or None.

    Case-insensitive equality wins (``nn.`` may be left out); otherwise a close match, only for names of 4 or more
    letters (``EMA`` is not a typo of ``ECA``). Only ``nn.Module`` layers are suggested, never whole models.
    """
    attention, layers = list(MODULES) + list(ALIASES) + list(CSP_BLOCKS), _layers()
    for pool in (attention, layers):
        for cand in pool:
            if name.lower() in (cand.lower(), cand.lower().removeprefix("nn.")):
                return cand
    if len(name) < 4:
        return None
    for pool in (attention, layers):
        if close := closest(name, pool, cutoff=0.75):
            return close
    return None


def unknown_module_message(i: int, section: str, name: str) -> str:
    """Error text for row ``i`` naming the unknown module ``name``: not provided, or the closest known name."""
    row = f"model YAML row {i} ({section})"
    if name.lower() in {n.lower() for n in NOT_PROVIDED}:
        return (
            f"{row}: '{name}' is not an attn_yolo block (provided: {', '.join(MODULES)}) nor a module Ultralytics' "
            f"YAML parser knows; aliases: {', '.join(ALIASES)}"
        )
    close = suggest(name)
    hint = f" Did you mean '{close}'?" if close else ""
    return (
        f"{row}: unknown module '{name}'.{hint} "
        f"Attention modules (attn_yolo): {', '.join(MODULES)}; other names must be Ultralytics modules "
        f"(ultralytics.nn.tasks), 'nn.<torch.nn class>' or 'torchvision.ops.<op>'."
    )


def _rows(d: dict) -> list:
    return list(d.get("backbone") or []) + list(d.get("head") or [])


def _ref_error(x, i: int) -> str | None:
    """Why layer reference ``x`` in the ``from`` field of row ``i`` is not an earlier layer, or None."""
    if not is_int(x):
        return f"{x!r} is not a layer index"
    if i == 0:
        return None if x == -1 else f"{x} is not -1 (row 0 reads the input image)"
    t = x if x >= 0 else i + x
    if t >= i:
        return f"{x} reads {'the row itself' if t == i else f'layer {t}, a later row'}"
    return None if t >= 0 else f"{x} counts back past the first row"


def _from_error(f, i: int) -> str | None:
    """Why ``from`` field ``f`` of row ``i`` does not read earlier layers only, or None if it does."""
    for x in f if isinstance(f, list) and f else [f]:
        if reason := _ref_error(x, i):
            allowed = "-1 (the input image)" if i == 0 else f"0..{i - 1}, or -1..-{i} counted back"
            return f"from={f!r}: {reason}; allowed: {allowed}, or a list of those"
    return None


def check_yaml_modules(d: dict) -> None:
    """Check a model dict ``d`` before ``parse_model`` reads it: rows, names, from, repeats, args.

    Raises:
        ModelYamlError: no rows; a row that is not ``[from, repeats, module, args]``; a ``from`` that is not an
            earlier layer (out of range, forward, ``True``); ``repeats`` not an int >= 1; args not a list.
        UnknownModuleError: for the first unknown name: says whether it is an attention block attn_yolo does not
            provide, or names the closest layer or block.
        AttnBuildError: an attention row whose ``from`` is not one layer, or with more args than its block takes.
    """
    file = f" {d.get('yaml_file')!r}" if isinstance(d, dict) and d.get("yaml_file") else ""
    sections = [d.get(k) if isinstance(d, dict) else None for k in ("backbone", "head")]
    if not all(isinstance(s, list) for s in sections) or not sections[0]:
        what = "is empty" if not d or set(d) <= {"scale", "yaml_file", "channels"} else "has no rows"
        raise ModelYamlError(
            f"model YAML{file} {what}: it needs a non-empty 'backbone' list and a 'head' list of "
            f"[from, repeats, module, args] rows (got keys: {', '.join(map(str, d or {})) or 'none'})"
        )
    rows = [("backbone", r) for r in sections[0]] + [("head", r) for r in sections[1]]
    head = None  # (row, name) of the first output head (Detect, Segment, ...)
    for i, (section, row) in enumerate(rows):
        where = f"model YAML row {i} ({section})"
        if not isinstance(row, (list, tuple)) or len(row) != 4 or not isinstance(row[2], str):
            raise ModelYamlError(f"{where}: expected [from, repeats, module, args], got {row!r}")
        f, n, m, args = row
        if not _known(m):
            raise UnknownModuleError(unknown_module_message(i, section, m))
        if head and canonical(m):
            raise ModelYamlError(f"model YAML row {i}: {m} after {head[1]} (row {head[0]}); attention must come "
                                 f"before the head's {head[1]}")
        if head is None and HEAD_RE.search(m.split(".")[-1]):
            head = (i, m)
        if err := _from_error(f, i):
            raise ModelYamlError(f"{where} {m}: {err}")
        if not is_int(n) or n < 1:
            raise ModelYamlError(f"{where} {m}: repeats={n!r} is invalid; allowed: an int >= 1")
        if not isinstance(args, list):
            edit = fmt([] if args is None else [args])
            raise ModelYamlError(f"{where} {m}: args={args!r} is not a list; write {edit}")
        if name := canonical(m):
            if len(args) > max_args(name, params := yaml_params(BLOCKS[name])):
                longest = max_args(name, params) - 1
                more = f" (a public signature of {name} takes {longest})" if longest > len(params) else ""
                raise AttnBuildError(
                    f"{where} {m}: args={fmt(args)} has {len(args)} values; {name} takes at most {len(params)}: "
                    f"[{', '.join(params)}], after an optional leading channel count{more}"
                )
            if not is_int(f):
                raise AttnBuildError(
                    f"{where} {m}: from={f!r}; an attention block reads one layer (an int such as -1); to attend a "
                    "concatenation, put the block after the Concat row"
                )


def _alias_note(written: str, name: str) -> str:
    if written == name:
        return ""
    extra = f" ({ALIAS_NOTES[written]})" if written in ALIAS_NOTES else ""
    return f"'{written}' is attn_yolo's {name}{extra}"


def _wrap(parse_model):
    @functools.wraps(parse_model)
    def attn_parse_model(d, ch, verbose=True):
        check_yaml_modules(d)
        names = {i: name for i, row in enumerate(_rows(d)) if (name := canonical(row[2]))}
        info = YamlInfo.of(d, ch, set(names))
        d = copy.deepcopy(d)  # parse_model edits rows' args in place; the caller's dict stays as written
        inner = csp.prepare(d, csp_name)  # C3k2_CBAM rows -> C3k2, converted after parse_model
        for i, row in enumerate(_rows(d)):
            if i in names:
                name = names[i]
                row[3] = [RowArgs(info, i, row[2], name, BLOCKS[name], row[3], _alias_note(row[2], name))]
                row[2] = f"attn_yolo:{name}"  # its YAML builder (BUILDERS)
        layers, save = parse_model(d, ch, verbose)
        csp.convert(layers, inner, verbose)
        return layers, save

    return attn_parse_model


def _wrap_init(initialize):
    """Wrap ``tasks._initialize_yolo_model`` so an empty or rowless YAML is refused before Ultralytics indexes it."""

    @functools.wraps(initialize)
    def attn_initialize(model, cfg, ch, nc, verbose):
        from ultralytics.nn.tasks import yaml_model_load

        cfg = cfg if isinstance(cfg, dict) else yaml_model_load(cfg)
        check_yaml_modules(cfg)
        return initialize(model, cfg, ch, nc, verbose)

    return attn_initialize


def _wrap_guess(guess):
    """Wrap the ``guess_model_task`` that ``YOLO(yaml)`` calls first (``ultralytics.engine.model``), so a YAML's row
    errors (e.g. attention after Detect, which makes the task unguessable) are said before Ultralytics' ``'None'
    task`` error."""

    @functools.wraps(guess)
    def attn_guess_model_task(model):
        if isinstance(model, dict) and "backbone" in model:
            check_yaml_modules(model)
        return guess(model)

    return attn_guess_model_task


def ensure_registered(*_args) -> None:
    """Ultralytics callback (any event) that makes sure the blocks are registered in this process."""
    register()


_ADDED_SAFE: list = []  # the SAFE_GLOBALS that register() added to torch's allow-list (not there before)


_REGISTERED = [False]  # register() ran and unregister() did not since


def _on_declare() -> None:
    """A declaration changed after ``import attn_yolo`` (a block in a file of the user's): register it too."""
    if _REGISTERED[0]:
        register()


_Declarations.listeners.append(_on_declare)


def register() -> None:
    """Make ``BLOCKS`` resolvable in Ultralytics YAMLs in this process; idempotent (``import attn_yolo`` runs it).

    An Ultralytics global in ``ultralytics.nn.tasks`` with a block's name is set aside (logged) and put back by
    ``unregister()``.
    """
    shadowed = api.install_globals(BLOCKS)
    api.install_globals(BUILDERS)
    if shadowed:
        from ultralytics.utils import LOGGER

        LOGGER.warning(f"attn-yolo: ultralytics.nn.tasks defines {', '.join(shadowed)}; YAML rows naming "
                       f"{'it' if len(shadowed) == 1 else 'them'} build attn_yolo's block (attn_yolo.unregister() "
                       "puts Ultralytics' back)")
    api.wrap("parse_model", _wrap)
    api.wrap("_initialize_yolo_model", _wrap_init)
    api.wrap("guess_model_task", _wrap_guess)
    prior = torch.serialization.get_safe_globals()
    new = [g for g in SAFE_GLOBALS if g not in prior]
    if new:
        torch.serialization.add_safe_globals(new)
        _ADDED_SAFE.extend(new)
    api.add_default_callback("on_pretrain_routine_start", ensure_registered)
    _REGISTERED[0] = True


def unregister() -> None:
    """Undo ``register()``: remove the names (putting back any Ultralytics global they shadowed), restore Ultralytics'
    ``parse_model``, ``_initialize_yolo_model`` and ``guess_model_task``, remove the callback, and take the classes
    ``register()`` added off torch's weights-only allow-list."""
    api.remove_globals([*BLOCKS, *BUILDERS])
    for name in ("parse_model", "_initialize_yolo_model", "guess_model_task"):
        api.unwrap(name)
    api.remove_default_callback("on_pretrain_routine_start", ensure_registered)
    _REGISTERED[0] = False
    if _ADDED_SAFE:
        keep = [g for g in torch.serialization.get_safe_globals() if g not in _ADDED_SAFE]
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(keep)
        _ADDED_SAFE.clear()
