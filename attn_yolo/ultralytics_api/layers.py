"""Contacts with Ultralytics' layers: class change in place, layer records, YAML args, qkv layout, Detect's output.

Each function states the assumption it makes; ``attn_yolo.ultralytics_api.contract.CONTRACT`` checks each against the
installed Ultralytics:

- ``become``: a built Ultralytics module turned into a subclass of its own class in place (the derived
  ``C3k2_<X>`` / ``AttnBottleneck`` of ``attn_yolo.csp``), its state kept;
- ``relabel_layer``: the ``np`` (parameter count) and ``type`` (class path) that ``parse_model`` writes on each
  layer and the model summary and checkpoints read;
- ``yaml_args``: the YAML args of an Ultralytics block after ``c1``, read from its signature, without the ``n`` that
  ``parse_model`` inserts for the blocks of its local ``repeat_modules``;
- ``instance_forward``: a layer's ``forward`` replaced for one instance within a block (``attn-yolo bench``);
- ``qkv_layout``: how the ``qkv`` conv of Ultralytics' ``Attention`` / ``AAttn`` lays out q, k and v;
- ``head_tensors``: ``Detect``'s eval-mode output, ``(y, preds)`` with ``preds`` a dict (or a dict per head branch)
  holding ``boxes`` (DFL logits) and ``scores`` (class logits) of every anchor.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import textwrap
import types
from collections.abc import Callable, Iterator
from typing import NamedTuple

import torch
from ultralytics.nn import tasks

import attn_yolo.ultralytics_api as api


def become(module: torch.nn.Module, cls: type) -> torch.nn.Module:
    """Turn ``module`` into an instance of ``cls``, a subclass of its own class that adds no ``__init__`` state, in
    place (its submodules, parameters and buffers kept). Returns ``module``.

    Raises:
        TypeError: ``cls`` is not a subclass of ``type(module)``.
    """
    if not issubclass(cls, type(module)):
        raise TypeError(f"become: {cls.__name__} is not a subclass of {type(module).__name__}")
    module.__class__ = cls
    return module


def relabel_layer(layer: torch.nn.Module, cls: type) -> int:
    """Update the record ``parse_model`` keeps on a top-level layer after it changed in place: ``np`` (its parameter
    count, printed in the model summary) and ``type`` (the class path, ``attn_yolo.csp.C3k2_CBAM``). Returns the
    number of parameters added since ``parse_model`` counted."""
    before = getattr(layer, "np", 0)
    layer.np = sum(p.numel() for p in layer.parameters())
    layer.type = f"{cls.__module__}.{cls.__qualname__}"
    return layer.np - before


@functools.cache
def repeat_modules() -> frozenset[str]:
    """Names of the blocks whose YAML ``n`` (repeats) ``parse_model`` passes as their third arg, read from the
    ``repeat_modules = frozenset({...})`` of its source.

    Raises:
        LookupError: the set is not readable from ``parse_model``'s source.
    """
    with contextlib.suppress(OSError, TypeError, SyntaxError):
        tree = ast.parse(textwrap.dedent(inspect.getsource(api.original(tasks, "parse_model"))))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "repeat_modules" for t in node.targets)
                    and isinstance(node.value, ast.Call) and node.value.args
                    and isinstance(node.value.args[0], ast.Set)):
                return frozenset(e.id for e in node.value.args[0].elts if isinstance(e, ast.Name))
    raise LookupError("parse_model's repeat_modules set is not readable from its source")


def yaml_args(cls: type) -> list[str]:
    """The args a YAML row of the Ultralytics block ``cls`` takes, in order, after the ``c1`` that ``parse_model``
    prepends: its ``__init__`` parameters, without ``n`` where ``parse_model`` inserts the row's repeats there
    (``C2f``: ``[c2, shortcut, g, e]``; ``SPPF``: ``[c2, k, n, shortcut]``)."""
    params = list(inspect.signature(cls.__init__).parameters)[2:]  # self, c1
    if cls.__name__ in repeat_modules() and params[1:2] == ["n"]:
        del params[1]
    return params


@contextlib.contextmanager
def instance_forward(layers: list[torch.nn.Module], fn: Callable) -> Iterator[None]:
    """Within the block, each of ``layers`` computes ``fn(layer, x)`` for its ``forward`` (an instance attribute
    that shadows its class's ``forward``; ``nn.Module.__call__`` looks ``forward`` up on the instance), removed on
    exit, also after an error."""
    for m in layers:
        m.forward = types.MethodType(fn, m)
    try:
        yield
    finally:
        for m in layers:
            m.__dict__.pop("forward", None)


class QKV(NamedTuple):
    """How the ``qkv`` 1×1 conv of an Ultralytics ``Attention`` / ``AAttn`` lays out its output channels: head-major,
    each head's ``q + k + v`` channels in the order q | k | v."""

    heads: int
    q: int
    k: int
    v: int

    @property
    def per_head(self) -> int:
        return self.q + self.k + self.v


def qkv_layout(m: torch.nn.Module) -> QKV:
    """The qkv layout of Ultralytics' ``Attention`` (q, k of ``key_dim``, v of ``head_dim``) or ``AAttn`` (q, k, v
    all of ``head_dim``); ``CONTRACT`` checks it against the v each class feeds its ``pe`` conv."""
    qk = getattr(m, "key_dim", m.head_dim)
    return QKV(m.num_heads, qk, qk, m.head_dim)


def split_v(m: torch.nn.Module, qkv: torch.Tensor) -> torch.Tensor:
    """The v channels of the output ``(B, heads·(q+k+v), H, W)`` of ``m.qkv``, as ``(B, heads·v, H, W)``: the v
    the layer's ``pe`` conv reads."""
    lay = qkv_layout(m)
    B, _, H, W = qkv.shape
    return qkv.view(B, lay.heads, lay.per_head, H * W)[:, :, lay.q + lay.k :].reshape(B, lay.heads * lay.v, H, W)


def head_tensors(out, keys: tuple[str, ...] = ("boxes", "scores")) -> list[torch.Tensor]:
    """The tensors under ``keys`` of ``Detect``'s output dicts (every head branch: one2many and one2one), from the
    ``(y, preds)`` an Ultralytics detection model returns in eval mode; [] when it has no such dict."""
    found: list[torch.Tensor] = []

    def walk(o):
        if isinstance(o, dict):
            for k in sorted(o):
                if k in keys and torch.is_tensor(o[k]):
                    found.append(o[k])
                elif k != "feats":
                    walk(o[k])
        elif isinstance(o, list | tuple):
            for v in o:
                walk(v)

    walk(out[1] if isinstance(out, tuple) and len(out) == 2 else out)
    return found
