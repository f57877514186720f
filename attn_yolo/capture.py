"""Gate capture, shared by heatmaps and health: find a model's attention blocks, record what each applies in a pass.

``attention_blocks`` finds the blocks (``attn_yolo.MODULES``) of an Ultralytics model; ``GateCapture``'s forward
hooks record, in one forward pass, each chosen block's input, the outputs of its gates and (MHSA) its attention
weights, and turn them into maps (``GateCapture.maps``). Hooks record, never modify: the model's own outputs are
untouched; they are removed on exit, also after an error. ``attn_yolo.heatmap`` draws the maps, ``attn_yolo.health``
measures them every epoch. Which gates a block has and what each map is: the tables of ``attn_yolo.heatmap.maps``,
read through ``gate_tables``: the tables there are derived from the blocks' declarations.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from attn_yolo.registry import MODULES


def gate_tables():
    """The module holding the gate tables (``GATE_MAPS``, ``ATTENTION_WEIGHTS``) and the map functions:
    ``attn_yolo.heatmap.maps``, imported on use."""
    from attn_yolo.heatmap import maps

    return maps


def _layers(model) -> nn.Module:
    """The layer list (``nn.Sequential``) of a ``DetectionModel`` or a ``YOLO``."""
    net = model.model
    return net if isinstance(net, nn.Sequential) else net.model


def _blocks_in(module: nn.Module, path: str = ""):
    """``(path, block)`` for every attention block in ``module``: the outermost ones (CBAM's gates are parts of it)."""
    if isinstance(module, tuple(MODULES.values())):
        yield path, module
        return
    for name, child in module.named_children():
        yield from _blocks_in(child, f"{path}.{name}" if path else name)


def attention_blocks(model) -> dict[tuple[int, str], nn.Module]:
    """``{(layer index, path in the layer): block}`` for every attention block (``attn_yolo.MODULES``) of an
    Ultralytics ``DetectionModel`` (or ``YOLO``).

    The path is ``""`` when the layer is the block itself, ``"0"``, ``"1"``, ... for the blocks of a row with
    ``repeats > 1`` (Ultralytics builds those as an ``nn.Sequential``), or the submodule path where a layer holds a
    block deeper inside.
    """
    return {(i, path): m for i, layer in enumerate(_layers(model)) for path, m in _blocks_in(layer)}


def block_gates(block: nn.Module) -> dict[str, nn.Module]:
    """``{gate path: gate submodule}`` of a block (``GATE_MAPS``); empty for a block without gates."""
    return gate_tables().block_gates(block)


def has_attention_weights(block: nn.Module) -> bool:
    """Whether the block's maps come from its attention weights (``ATTENTION_WEIGHTS``: MHSA), not from gates."""
    return gate_tables().gives_attention_weights(block)


def attention_rows(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Softmax attention rows ``(B, h, n, N)`` of queries ``q`` ``(B, h, n, d)`` on keys ``k`` ``(B, h, N, d)``."""
    return gate_tables().attention_rows(q, k)


class GateCapture:
    """Context manager: forward hooks that record the maps the blocks ``blocks`` (keyed as ``attention_blocks``) of
    ``model`` apply; removed on exit.

    Example:
        >>> with GateCapture(model, attention_blocks(model)) as cap:
        ...     y = model(x)
        >>> maps = cap.maps()  # list[AttentionMap] of image 0 of the batch

    Only the last forward pass is kept. Hooks record, never modify: outputs are identical with and without capture.
    ``chunk``: queries per block of explicit attention weights for ``ATTENTION_WEIGHTS`` blocks
    (``explicit_attention_maps``; memory ``O(N · chunk)``).
    """

    def __init__(self, model: nn.Module, blocks: dict[tuple[int, str], nn.Module], chunk: int | None = None):
        self.model = model
        self.blocks = blocks
        self.chunk = chunk or gate_tables().QUERY_CHUNK
        self.handles: list = []
        self.records: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
        self.input_shape: tuple[int, int] | None = None

    def __enter__(self) -> GateCapture:
        try:
            self.handles.append(self.model.register_forward_pre_hook(self._on_input))
            for key, b in self.blocks.items():
                self.handles.append(b.register_forward_hook(self._on_block(key)))
                for path, gate in block_gates(b).items():
                    self.handles.append(gate.register_forward_hook(self._on_gate(key, path)))
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        """Remove every hook this capture registered (and only those)."""
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _on_input(self, module, args):
        self.records.clear()
        self.input_shape = tuple(args[0].shape[-2:])

    def _on_gate(self, key: tuple[int, str], path: str):
        def hook(module, args, out):
            self.records.setdefault(key, {})["gate:" + path] = out.detach()

        return hook

    def _on_block(self, key: tuple[int, str]):
        def hook(module, args, out):
            rec = self.records.setdefault(key, {})
            x = args[0].detach()
            rec["x"] = x
            if has_attention_weights(module):
                # the fused forward already produced `out`
                y, maps = gate_tables().explicit_attention_maps(module, x, self.chunk)
                rec.update(maps)
                rec["check"] = (y - out.detach()).abs().amax()

        return hook

    def maps(self, b: int = 0, query_cells: list[tuple[int, tuple[float, float]]] | None = None) -> list:
        """The maps of image ``b`` of the last forward pass, in layer order.

        Args:
            b: index in the batch.
            query_cells: for MHSA query maps, ``(x, y)`` pairs in model-input pixels, each with the label to store
                (original-image ``(x, y)``) as ``[(input_xy, original_xy), ...]``.
        """
        if self.input_shape is None:
            raise RuntimeError(f"{type(self).__name__}.maps(): no forward pass was captured")
        tables, out = gate_tables(), []
        for (i, part), block in self.blocks.items():
            rec, name = self.records.get((i, part)), type(block).__name__
            if rec is None:
                continue  # the forward pass did not reach this layer
            x = rec["x"]
            stride = max(1, round(self.input_shape[0] / x.shape[-2]))
            scale = getattr(block, "scale", None)
            gamma = None if scale is None else float(scale.gamma.detach().abs().mean())

            def add(kind, m, i=i, name=name, stride=stride, gamma=gamma, part=part, **kw):
                m = m.float().cpu().numpy().astype(np.float32)
                out.append(tables.AttentionMap(i, name, kind, m, stride, gamma=gamma, part=part, **kw))

            for kind, (fn, *paths) in tables.block_maps(block).items():
                add(kind, tables.map_fn(fn)(x, *(rec["gate:" + p] for p in paths))[b])
            if has_attention_weights(block):
                h, w = x.shape[-2:]
                check = float(rec["check"])
                add("received", rec["received"][b].reshape(h, w), check=check)
                for k, ((xi, yi), orig) in enumerate(query_cells or []):
                    r = min(max(int(yi // stride), 0), h - 1)
                    c = min(max(int(xi // stride), 0), w - 1)
                    j = r * w + c
                    row = attention_rows(rec["q"][b : b + 1, :, j : j + 1], rec["k"][b : b + 1])  # (1, h, 1, N)
                    add(f"query{k}", row.mean(1).reshape(h, w), query=orig, check=check)
        return out
