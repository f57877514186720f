"""Where a YAML module name is resolved: the attention registry and its registration with Ultralytics.

``register()`` (run by ``import attn_yolo``) does four things, all reversible and idempotent:

1. puts every class of ``MODULES`` into the namespace of ``ultralytics.nn.tasks``, where ``parse_model`` looks YAML
   names up (``globals()[name]``);
2. wraps ``ultralytics.nn.tasks.parse_model`` so that (a) every row's module name is checked first, and an unknown
   name raises ``UnknownModuleError`` naming the row, the name, the attention modules and the closest match, instead
   of a bare ``KeyError``; (b) each attention row's args get the marker ``C1`` prepended, so the block takes its input
   width from the layer it reads (``attn_yolo.build``);
3. allow-lists the classes for weights-only loading (``ULTRALYTICS_SAFE_LOAD=1``, ``torch.serialization``);
4. adds a callback to Ultralytics' default callbacks. Multi-GPU training pickles the trainer's callbacks into the
   DDP worker state (``ultralytics.utils.dist.generate_ddp_file``); unpickling this function imports ``attn_yolo`` in
   each worker, so workers can build YAMLs naming the blocks even when the trainer holds a YAML path, not a model.
"""

from __future__ import annotations

import copy
import difflib
import functools
import inspect

import torch

from attn_yolo import build
from attn_yolo.nn import (
    CBAM,
    ECA,
    EMA,
    GAM,
    MHSA,
    NAM,
    SAM,
    SE,
    CoordAtt,
    LayerScale,
    ShuffleAttention,
    SimAM,
    TripletAttention,
)
from attn_yolo.nn.cbam import ChannelGate, SpatialGate
from attn_yolo.nn.common import C1, AttnBuildError
from attn_yolo.nn.triplet import ZPoolGate

MODULES: dict[str, type[torch.nn.Module]] = {"SE": SE, "ECA": ECA, "SAM": SAM, "CBAM": CBAM, "MHSA": MHSA}
MODULES |= {"CoordAtt": CoordAtt, "EMA": EMA, "SimAM": SimAM, "GAM": GAM, "ShuffleAttention": ShuffleAttention}
MODULES |= {"TripletAttention": TripletAttention, "NAM": NAM}
"""YAML name → attention block class."""

ALIASES: dict[str, str] = {}
ALIASES |= {"CA": "CoordAtt", "CoordAttention": "CoordAtt", "CoordinateAttention": "CoordAtt"}
ALIASES |= {"EMA_attention": "EMA", "EMAttention": "EMA", "simam_module": "SimAM", "GAM_Attention": "GAM"}
ALIASES |= {"SA": "ShuffleAttention", "sa_layer": "ShuffleAttention", "ShuffleAttBlock": "ShuffleAttention"}
ALIASES |= {"Triplet": "TripletAttention", "NAMAttention": "NAM", "NAM_Attention": "NAM"}
"""Other names public YAMLs use for a block → its name in ``MODULES`` (e.g. ``"SEAttention": "SE"``)."""

SAFE_GLOBALS = [*MODULES.values(), ChannelGate, SpatialGate, LayerScale, ZPoolGate]


class UnknownModuleError(KeyError):
    """A model YAML names a module that neither Ultralytics nor attn_yolo defines. A ``KeyError`` for compatibility."""

    def __str__(self) -> str:  # KeyError would print the message repr-quoted
        return str(self.args[0])


def _known(name: str) -> bool:
    from ultralytics.nn import tasks

    if name.startswith("nn."):
        return hasattr(torch.nn, name[3:])
    if name.startswith("torchvision.ops."):
        import torchvision

        return hasattr(torchvision.ops, name[16:])
    return name in vars(tasks)


def unknown_module_message(i: int, section: str, name: str) -> str:
    """Error text for row ``i`` naming the unknown module ``name``: attention modules and the closest known name."""
    from ultralytics.nn import tasks

    candidates = list(MODULES) + [k for k, v in vars(tasks).items() if isinstance(v, type) and k[0].isupper()]
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5) or difflib.get_close_matches(
        name.upper(), list(MODULES), n=1, cutoff=0.5
    )
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return (
        f"model YAML row {i} ({section}): unknown module '{name}'.{hint} "
        f"Attention modules (attn_yolo): {', '.join(MODULES)}; other names must be Ultralytics modules "
        f"(ultralytics.nn.tasks), 'nn.<torch.nn class>' or 'torchvision.ops.<op>'."
    )


def yaml_params(cls: type) -> list[str]:
    """Names of a block's YAML args, in order: its constructor parameters after ``c1``."""
    return [p for p in inspect.signature(cls).parameters if p != "c1"]


def check_yaml_modules(d: dict) -> None:
    """Check that every row of a model dict ``d`` names a resolvable module.

    Raises:
        UnknownModuleError: for the first unknown name, naming the row, the name and the closest match.
        AttnBuildError: for an attention row whose ``from`` is not a single layer index.
        ValueError: for a row that is not ``[from, repeats, module, args]``.
    """
    rows = [("backbone", r) for r in d.get("backbone") or []] + [("head", r) for r in d.get("head") or []]
    for i, (section, row) in enumerate(rows):
        if not isinstance(row, (list, tuple)) or len(row) != 4 or not isinstance(row[2], str):
            raise ValueError(f"model YAML row {i} ({section}): expected [from, repeats, module, args], got {row!r}")
        if not _known(row[2]):
            raise UnknownModuleError(unknown_module_message(i, section, row[2]))
        if row[2] in MODULES and len(row[3] or []) > len(hparams := yaml_params(MODULES[row[2]])):
            raise AttnBuildError(
                f"model YAML row {i} ({section}) {row[2]}: args={row[3]!r} has {len(row[3])} values; "
                f"{row[2]} takes at most {len(hparams)}: [{', '.join(hparams)}] (channels are inferred)"
            )
        if row[2] in MODULES and not isinstance(row[0], int):
            raise AttnBuildError(
                f"model YAML row {i} ({section}) {row[2]}: from={row[0]!r}; an attention block reads one layer "
                "(an int such as -1); to attend a concatenation, put the block after the Concat row"
            )


def _wrap(parse_model):
    @functools.wraps(parse_model)
    def attn_parse_model(d, ch, verbose=True):
        check_yaml_modules(d)
        d = copy.deepcopy(d)  # parse_model edits rows' args in place; the caller's dict stays as written
        for row in (d.get("backbone") or []) + (d.get("head") or []):
            if row[2] in MODULES:
                row[3] = [C1, *(row[3] or [])]
        return parse_model(d, ch, verbose)

    attn_parse_model.__attn_yolo_original__ = parse_model
    return attn_parse_model


def ensure_registered(*_args) -> None:
    """Ultralytics callback (any event) that makes sure the blocks are registered in this process."""
    register()


def register() -> None:
    """Make ``MODULES`` resolvable in Ultralytics model YAMLs in this process. Idempotent; ``import attn_yolo`` runs it."""
    from ultralytics.nn import tasks
    from ultralytics.utils.callbacks import base

    vars(tasks).update(MODULES)
    if not hasattr(tasks.parse_model, "__attn_yolo_original__"):
        build.PARSE_MODEL_CODE = tasks.parse_model.__code__
        tasks.parse_model = _wrap(tasks.parse_model)
    torch.serialization.add_safe_globals(SAFE_GLOBALS)
    hooks = base.default_callbacks["on_pretrain_routine_start"]
    if ensure_registered not in hooks:
        hooks.append(ensure_registered)


def unregister() -> None:
    """Undo ``register()`` (for tests): remove the names, restore Ultralytics' ``parse_model`` and callbacks."""
    from ultralytics.nn import tasks
    from ultralytics.utils.callbacks import base

    for name, cls in MODULES.items():
        if vars(tasks).get(name) is cls:
            delattr(tasks, name)
    tasks.parse_model = getattr(tasks.parse_model, "__attn_yolo_original__", tasks.parse_model)
    hooks = base.default_callbacks["on_pretrain_routine_start"]
    if ensure_registered in hooks:
        hooks.remove(ensure_registered)
