"""Capture: forward hooks record the maps the selected attention blocks apply in one forward pass.

Hooks record, never modify: the model's own outputs are untouched; they are removed on exit, also after an error.
What each map is: ``attn_yolo.heatmap.maps``.
"""

from __future__ import annotations

import numpy as np
import torch

from attn_yolo.heatmap.maps import (
    QUERY_CHUNK,
    AttentionMap,
    attention_rows,
    block_gates,
    block_maps,
    explicit_attention_maps,
    gives_attention_weights,
    map_fn,
)
from attn_yolo.heatmap.model import as_model, resolve_layers


class AttentionCapture:
    """Context manager: forward hooks that record the maps the selected blocks apply; removed on exit.

    Example:
        >>> with AttentionCapture(model, layers="all") as cap:
        ...     y = model(x)
        >>> maps = cap.maps()  # list[AttentionMap] of image 0 of the batch

    Only the last forward pass is kept. Hooks record, never modify: outputs are identical with and without capture.
    ``chunk``: queries per block of explicit attention weights for ``ATTENTION_WEIGHTS`` blocks
    (``explicit_attention_maps``; memory ``O(N · chunk)``).
    """

    def __init__(self, model, layers="all", chunk: int = QUERY_CHUNK):
        self.model = as_model(model)
        self.blocks = resolve_layers(self.model, layers)
        self.chunk = chunk
        self.handles: list = []
        self.records: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
        self.input_shape: tuple[int, int] | None = None

    def __enter__(self) -> AttentionCapture:
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
            if gives_attention_weights(module):
                y, maps = explicit_attention_maps(module, x, self.chunk)  # the fused forward already produced `out`
                rec.update(maps)
                rec["check"] = (y - out.detach()).abs().amax()

        return hook

    def maps(self, b: int = 0, query_cells: list[tuple[int, tuple[float, float]]] | None = None) -> list[AttentionMap]:
        """The maps of image ``b`` of the last forward pass, in layer order.

        Args:
            b: index in the batch.
            query_cells: for MHSA query maps, ``(x, y)`` pairs in model-input pixels, each with the label to store
                (original-image ``(x, y)``) as ``[(input_xy, original_xy), ...]``.
        """
        if self.input_shape is None:
            raise RuntimeError("AttentionCapture.maps(): no forward pass was captured")
        out = []
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
                out.append(AttentionMap(i, name, kind, m, stride, gamma=gamma, part=part, **kw))

            for kind, (fn, *paths) in block_maps(block).items():
                add(kind, map_fn(fn)(x, *(rec["gate:" + p] for p in paths))[b])
            if gives_attention_weights(block):
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
