"""Mean ablation: an attention block's gates and attention held at their mean over images, input dependence removed.

A block that attends multiplies its input by gates (or mixes tokens by attention weights) that depend on the input.
Knocking the block out (the identity in its place) removes two things at once: the average scaling the gates apply,
which any constant would do, and their dependence on the input, which is what attention is. Mean ablation (the
"mean ablation" of mechanistic interpretability; Wang et al., "Interpretability in the Wild", ICLR 2023) removes only
the second: each gate's output is replaced by its mean over a set of images, so the block keeps its average scaling
and loses its dependence on the input. If a trained model's accuracy does not change under it, its blocks act as a
fixed rescale, and a verdict about them is not a verdict about attention.

What is held at its mean is derived from each block's declaration (``attn_yolo.nn.declaration``):

- every **gate** of ``gate_maps`` (``Declaration.gates``): its output ``(B', ..., h, w)`` is averaged over the images
  and, for a gate of four or more axes, over its last two (spatial) axes, per everything else: a channel gate
  ``(B, C, 1, 1)`` or ECA's ``(B, 1, C)`` per channel, a spatial
  map ``(B, 1, H, W)`` in total, a coordinate gate ``(B, C, H, 1)`` per channel, grouped gates ``(B·G, c, h, w)`` per
  channel of each group (the batch-folded groups restored as ``(B, G·c)``), SK's selection ``(B, M, C, 1, 1)`` per
  branch and channel. Per position is not used: Ultralytics validates in rectangular batches of differing ``(h, w)``,
  and a letterboxed position is not the same place in two images; the per-image mean over positions keeps what
  the map does on average, as the per-channel mean does for a channel gate.
- the **attention** of a block that declares ``attends`` (``MHSA``, ``BiLevelRoutingAttention``): that method is
  replaced by uniform attention over the keys each query may attend (BiFormer's routing and padding mask kept):
  every output token is the plain mean of those values, the softmax of equal scores. Nothing is recorded for it.

A block that declares neither (the ablation's ``Placebo``) has nothing to hold: ``MeanAblation.parts`` is 0.
``MeanAblation`` records means while armed (``arm``, e.g. from a validator's ``on_val_batch_start``, so that a
warm-up or FLOPs pass on a dummy tensor is never counted), then replaces (``replacing``).
"""

from __future__ import annotations

import contextlib
import functools
import types

import torch
from torch import nn

from attn_yolo.nn.declaration import Declaration, declaration_of


def declared_blocks(model: nn.Module, paths: list[str]) -> list[tuple[nn.Module, Declaration]]:
    """``(block, declaration)`` for every declared block at or inside the modules at ``paths`` of ``model`` (an
    inserted row with ``repeats > 1`` holds several; a ``C3k2_CBAM`` path is the block itself).

    Raises:
        AttributeError: a path that is not a submodule of ``model``.
    """
    out = []
    for path in paths:
        for m in model.get_submodule(path).modules():
            d = declaration_of(m)
            if d is not None and all(m is not b for b, _ in out):
                out.append((m, d))
    return out


class GateMean:
    """The running mean of one gate's output over images (``add``), and that mean in the gate's place (``expand``).

    A gate of four or more axes ``(B', ..., h, w)`` is averaged over its last two (spatial) axes too; ``B'`` may fold
    groups into the batch (``B' = B·G``), which the mean keeps apart as ``(B, G·...)``."""

    def __init__(self):
        self.total, self.images = None, 0

    @staticmethod
    def _plane(g: torch.Tensor) -> tuple[int, ...]:
        return tuple(g.shape[-2:]) if g.dim() >= 4 else ()

    def add(self, g: torch.Tensor, images: int) -> None:
        """Add a gate output of a batch of ``images`` images."""
        plane = self._plane(g)
        per_image = g.detach().double().reshape(images, -1, *plane)
        per_image = (per_image.mean((-2, -1)) if plane else per_image).sum(0)
        self.total = per_image if self.total is None else self.total + per_image
        self.images += images

    def expand(self, g: torch.Tensor, images: int) -> torch.Tensor:
        """The mean shaped as ``g`` (a batch of ``images`` images), in ``g``'s dtype.

        Raises:
            RuntimeError: nothing was recorded, or the gate's width differs from the recorded one.
        """
        if not self.images:
            raise RuntimeError("mean ablation: no gate output was recorded while armed")
        plane = self._plane(g)
        mean = (self.total / self.images).to(g.dtype).view(1, -1, *(1,) * len(plane))
        return mean.expand(images, -1, *plane).reshape(g.shape)


def uniform_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None):
    """In place of a block's ``attend``: each query's output is the mean of the values ``(B, h, N, d)`` it may attend
    (``mask`` ``(..., 1, N)``: True where it may; None: all), the softmax of equal scores. Returns ``(output, None)``
    with ``q``'s shape."""
    if mask is None:
        mean = v.mean(-2, keepdim=True)
    else:
        w = mask.to(v.dtype)
        mean = (w @ v) / w.sum(-1, keepdim=True)
    return mean.expand(*q.shape[:-1], v.shape[-1]).contiguous(), None


class MeanAblation:
    """Hold the gates and attention of the declared blocks at ``paths`` of ``model`` at their mean (module docstring).

    Usage::

        mean = MeanAblation(model, ["model.5", "model.8"])
        with mean.recording():      # forward passes while armed add to the means
            mean.arm()              # e.g. validator.add_callback("on_val_batch_start", lambda v: mean.arm())
            model(images)
        with mean.replacing():      # gates = their means, attention uniform over its keys
            model(images)

    Args:
        model: the model (an Ultralytics ``DetectionModel``); hooks go on its own submodules.
        paths: module paths of the blocks (``attn_yolo.ablate.statistics.treatment.new_block_paths``).

    Attributes:
        parts (int): gates and attention operators held (0: nothing to ablate, e.g. a ``Placebo``).
    """

    def __init__(self, model: nn.Module, paths: list[str]):
        self.blocks = declared_blocks(model, paths)
        self.gates = [(b, blk.get_submodule(p), GateMean()) for b, (blk, d) in enumerate(self.blocks) for p in d.gates]
        self.attends = [(blk, d.attends) for blk, d in self.blocks if d.attends]
        self.parts = len(self.gates) + len(self.attends)
        self.armed = False
        self._images: dict[int, int] = {}  # block index -> images in its current call
        # Hooks carry indices, never objects: Ultralytics' AutoBackend deep-copies the model it validates, hooks
        # included, and a copied GateMean would record into the copy.

    def arm(self, *_) -> None:
        """Start recording (ignores its arguments: usable as an Ultralytics callback)."""
        self.armed = True

    def _batch_hooks(self) -> list:
        def pre(b, block, args):
            self._images[b] = args[0].shape[0]

        return [blk.register_forward_pre_hook(functools.partial(pre, b)) for b, (blk, _) in enumerate(self.blocks)]

    @contextlib.contextmanager
    def _hooked(self, gate_hook):
        handles = self._batch_hooks()
        handles += [gate.register_forward_hook(functools.partial(gate_hook, b, i))
                    for i, (b, gate, _) in enumerate(self.gates)]
        try:
            yield self
        finally:
            for h in handles:
                h.remove()
            self.armed = False

    def recording(self):
        """Context: while armed, every gate output adds to its gate's mean."""

        def hook(b, i, module, args, out):
            if self.armed:
                self.gates[i][2].add(out, self._images[b])

        return self._hooked(hook)

    @contextlib.contextmanager
    def replacing(self):
        """Context: every gate outputs its recorded mean; every declared ``attends`` is uniform attention."""

        def hook(b, i, module, args, out):
            return self.gates[i][2].expand(out, self._images[b])

        for blk, name in self.attends:  # the instance's method over the class's (a deep copy rebinds it to the copy)
            setattr(blk, name, types.MethodType(uniform_attention, blk))
        try:
            with self._hooked(hook):
                yield self
        finally:
            for blk, name in self.attends:
                delattr(blk, name)
