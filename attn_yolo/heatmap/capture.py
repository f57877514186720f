"""The heatmap tool's capture: ``attn_yolo.capture.GateCapture`` on the layers a user selects (``layers=``)."""

from __future__ import annotations

from attn_yolo.capture import GateCapture
from attn_yolo.heatmap.maps import QUERY_CHUNK
from attn_yolo.heatmap.model import as_model, resolve_layers


class AttentionCapture(GateCapture):
    """Context manager: forward hooks that record the maps the selected blocks apply; removed on exit.

    Example:
        >>> with AttentionCapture(model, layers="all") as cap:
        ...     y = model(x)
        >>> maps = cap.maps()  # list[AttentionMap] of image 0 of the batch

    ``model``: a checkpoint or YAML path, a ``YOLO`` or its ``DetectionModel``; ``layers``: as ``resolve_layers``.
    Only the last forward pass is kept; outputs are identical with and without capture.

    Raises:
        HeatmapError: ``model`` does not load, or ``layers`` names no attention layer of it.
    """

    def __init__(self, model, layers="all", chunk: int = QUERY_CHUNK):
        model = as_model(model)
        super().__init__(model, resolve_layers(model, layers), chunk)
