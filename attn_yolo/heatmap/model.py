"""The model under study: load it, select the layers to capture (and the heatmap tool's errors).

Blocks are found in every layer, also inside the ``nn.Sequential`` Ultralytics builds for a row with ``repeats > 1``;
such a block's maps carry its path in the layer (``AttentionMap.part``, e.g. ``"1"`` for the second repeat).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from attn_yolo.capture import attention_blocks
from attn_yolo.checkpoint import load_model
from attn_yolo.registry import MODULES


class HeatmapError(ValueError):
    """Bad input to the heatmap tool: an unreadable image, a bad ``layers=`` value, a model without blocks."""


class NoAttentionError(HeatmapError):
    """The model has no attention block to capture."""


def as_model(model, trust: bool = False) -> nn.Module:
    """The Ultralytics ``nn.Module`` (``DetectionModel``) of a checkpoint/YAML path, a ``YOLO`` object or the module.

    A checkpoint loads weights-only unless ``trust`` (``attn_yolo.checkpoint.load_yolo``).

    Raises:
        HeatmapError: a missing file, a refused checkpoint, or an object that is not an Ultralytics model.
    """
    if isinstance(model, (str, Path)) and Path(model).suffix in (".yaml", ".yml") and Path(model).is_file():
        from ultralytics.utils import LOGGER

        LOGGER.warning(f"heatmap: {Path(model).name} is a model YAML: random weights, the maps show an untrained model")
    return load_model(model, "model", HeatmapError, trust=trust)


def resolve_layers(model, layers="all") -> dict[tuple[int, str], nn.Module]:
    """Attention blocks selected by ``layers`` (``"all"``/None, an index, a list, or ``"5,8"``): every block of each
    chosen layer, keyed as ``attention_blocks``.

    Raises:
        NoAttentionError: the model has no attention block.
        HeatmapError: an index that is not an attention layer (the message lists the attention layers).
    """
    model = as_model(model)
    found = attention_blocks(model)
    per_layer: dict[int, list[str]] = {}
    for (i, _), m in found.items():
        per_layer.setdefault(i, []).append(type(m).__name__)
    listing = ", ".join(f"{i} ({' + '.join(names)})" for i, names in per_layer.items())
    if not found:
        raise NoAttentionError(
            f"the model has no attention blocks ({', '.join(MODULES)}) among its {len(model.model)} layers: "
            f"no attention maps to capture. {cam_hint()}"
        )
    if layers is None or (isinstance(layers, str) and layers.strip().lower() == "all"):
        return found
    tokens = layers.strip("[]() ").split(",") if isinstance(layers, str) else layers
    tokens = tokens if isinstance(tokens, list | tuple) else [tokens]
    try:
        if not tokens or any(isinstance(t, bool | float) for t in tokens):
            raise ValueError
        idx = [int(t) for t in tokens]
    except (TypeError, ValueError):
        raise HeatmapError(
            f"layers={layers!r}: expected 'all', a layer index or a comma-separated list; attention layers: {listing}"
        ) from None
    n = len(model.model)
    for i in idx:
        if i not in per_layer:
            what = (
                f"layer {i} is {type(model.model[i]).__name__}, not an attention block"
                if -n <= i < n
                else (f"there is no layer {i} (the model has layers 0..{n - 1})")
            )
            raise HeatmapError(f"layers={layers}: {what}. Attention layers: {listing}")
    return {key: m for i in idx for key, m in found.items() if key[0] == i}


def cam_hint() -> str:
    """Whether class-activation maps are available instead."""
    try:
        import pytorch_grad_cam  # noqa: F401

        return "Class-activation maps need no attention block: add cam=eigencam (or cam=gradcam)."
    except ImportError:
        return "Class-activation maps need no attention block: pip install 'attn-yolo[cam]', then add cam=eigencam."
