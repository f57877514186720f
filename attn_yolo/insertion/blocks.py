"""The inserted blocks' YAML args: a block name or alias to its class, its args checked and filled in.

Identity at init (``identity=True``; the CLI default when ``pretrained`` is given, ``transfer``'s default for a YAML
target): every inserted block gets ``init_values=0.0`` written into its YAML args (the constructor defaults before it
are filled in from ``inspect.signature``, so a re-parsed checkpoint rebuilds the same parameters). Each block then
computes ``y = x + γ ⊙ (block(x) − x)`` with a per-channel ``γ`` initialised to 0 (``attn_yolo.layer_scale``):
LayerScale (Touvron et al., "Going deeper with Image Transformers", ICCV 2021) used as a zero-initialised residual
gate, as in ReZero (Bachlechner et al., 2020) and zero-γ residual init (Goyal et al., 2017). At ``γ = 0`` the block is
exactly the identity, so the augmented model with transferred weights predicts exactly what the base predicts; the
first gradient step moves ``γ`` (``∂L/∂γ = (block(x) − x) · ∂L/∂y``), after which the block's own weights train.
"""

from __future__ import annotations

import inspect

from attn_yolo.conventions import NONE_MEANS, bind
from attn_yolo.insertion import inner
from attn_yolo.insertion.base import InsertionError
from attn_yolo.registry import ALIASES, BLOCKS, CSP_BLOCKS, MODULES, canonical
from attn_yolo.text import did_you_mean


def module_class(name: str) -> tuple[str, type]:
    """``(YAML name, class)`` of an attention block, its name or an alias; case-insensitive. For a block inside a
    CSP block (``C3k2_CBAM``, ``attn_yolo.csp``): its name and the attention class inside (``CBAM``).

    Raises:
        InsertionError: naming the choices.
    """
    if isinstance(name, str):
        for key in [*BLOCKS, *ALIASES]:
            if key.lower() == name.strip().lower() and (block := canonical(key)):
                return block, BLOCKS[block]
        if derived := inner.derived_name(name):
            return derived, CSP_BLOCKS[derived].attention
    hint = did_you_mean(str(name).upper(), MODULES, cutoff=0.5, sentence=True)
    raise InsertionError(f"module={name!r}: unknown attention block.{hint} Allowed: {', '.join(MODULES)}, or one of "
                         "them inside the base's C2f / C3k2 / SPPF rows: C3k2_CBAM, C2f_SE, SPPF_ECA, ...")


def attention_class(name: str) -> type:
    """The attention class a block name (or alias) builds; for ``C3k2_CBAM`` the block inside (``CBAM``)."""
    return BLOCKS[canonical(name)] if canonical(name) else CSP_BLOCKS[name].attention


def block_args(name: str, args, identity: bool) -> list:
    """YAML args for block ``name``: ``args`` checked against its signature and written positionally (CBAM's lone
    kernel ``[7]`` becomes ``[16, 7]``, see ``attn_yolo.conventions``); with ``identity``, defaults filled up to
    ``init_values = 0.0``. ``None`` is written as the string ``"None"``, as PyYAML loads it from Ultralytics' YAMLs.

    Raises:
        InsertionError: too many args, or ``init_values`` given with another value than 0.0 while ``identity``.
    """
    name, cls = module_class(name)
    params = [p for p in inspect.signature(cls).parameters.values() if p.name != "c1"]
    names = [p.name for p in params]
    args = [] if args is None else list(args) if isinstance(args, (list, tuple)) else [args]
    if len(args) > len(params):
        raise InsertionError(f"args={args!r}: {name} takes at most {len(params)} args [{', '.join(names)}]")
    kwargs = bind(name, cls, args)[0]
    args = [kwargs.get(p.name, p.default) for p in params[: max((names.index(k) + 1 for k in kwargs), default=0)]]
    args = ["None" if a is None else a for a in args]
    if identity:
        if "init_values" not in names:
            raise InsertionError(f"{name} has no init_values argument, so it cannot start as the identity")
        k = names.index("init_values")
        if len(args) > k and args[k] != 0.0:
            raise InsertionError(
                f"args={args!r}: {name} init_values={args[k]!r}, but identity=True sets init_values=0.0 "
                f"(pass identity=False to keep yours)"
            )
        args += [("None" if p.default is None else p.default) for p in params[len(args) : k]]
        args[k:] = [0.0]
    return args


def describe_args(name: str, args: list) -> str:
    """``r=16, k=7``: the block's effective hyperparameters (defaults filled in; None shown only where it means
    something, e.g. ECA's adaptive k)."""
    params = [p for p in inspect.signature(attention_class(name)).parameters.values() if p.name != "c1"]
    vals = [(p.name, args[i] if i < len(args) else p.default) for i, p in enumerate(params)]
    vals = [(n, NONE_MEANS.get((name, n)) if v in (None, "None") else v) for n, v in vals]
    return ", ".join(f"{n}={v}" for n, v in vals if v is not None)


def block_reference(name: str) -> str:
    cls = BLOCKS.get(name) or CSP_BLOCKS[name]
    return (cls.__doc__ or name).strip().splitlines()[0].rstrip(".")


def param_index(name: str) -> int:
    """Number of YAML args before ``init_values`` for block ``name`` (or an alias)."""
    params = [p.name for p in inspect.signature(attention_class(name)).parameters.values() if p.name != "c1"]
    return params.index("init_values")
