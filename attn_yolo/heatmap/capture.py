"""Capture: hooks record the maps each attention block applied in one forward pass; map arithmetic and statistics.

The maps, all ``>= 0``, on the block's feature grid ``(h, w)`` (``stride = input side / feature side``):

- ``spatial`` (``SAM``, ``CBAM``'s spatial gate): the gate ``M_s(x) ∈ [0, 1]`` itself, as multiplied into ``x``.
- ``channel`` (``SE``, ``ECA``, ``CBAM``'s channel gate): the gate ``s ∈ [0, 1]^C`` has no spatial extent. The map is
  its L1 gain at each location, ``G(h, w) = Σ_c s_c |x_c(h, w)| / Σ_c |x_c(h, w)|`` with ``x`` the gate's input
  (the block input): the fraction of the feature magnitude at ``(h, w)`` that passes the gate, i.e. the
  magnitude-weighted mean gate value there, ``= ‖x(h,w) ⊙ s‖₁ / ‖x(h,w)‖₁``. It lies in ``[min s, max s]``; it is
  high where the channels the gate keeps open dominate, and constant when the gate treats all channels alike (a
  gate that emphasises nowhere). Unlike a gate-weighted feature magnitude it does not merely redraw where features
  are strong.
- the same gain for gates with spatial extent (``gain_map``: ``s_c(h, w)`` in place of ``s_c``), for the blocks whose
  gates vary over channels and locations: ``CoordAtt`` (``coord``: ``g_h ⊙ g_w``), ``EMA``, ``SimAM``, ``NAM``
  (``gain``), ``GAM`` and ``ShuffleAttention`` (``channel``, ``spatial``: each gate over the channels it multiplies),
  ``TripletAttention`` (``cw``, ``hc``: the rotated branch gates; ``hw``: the ``(H, W)`` gate itself). ``GATE_MAPS``
  says which gate each map reads.
- ``received`` (``MHSA``): attention each location receives, the explicit ``softmax(QKᵀ/√d)`` weights
  ``(B, h, N, N)`` averaged over heads and queries; sums to 1 over the ``N = h·w`` locations (uniform: ``1/N``).
- ``query<k>`` (``MHSA``, optional ``query=``): the weights of the query cell under point ``k`` (mean over heads), e.g.
  a detection's centre (``query=det``: the 3 most confident); sums to 1.

A block with a residual gate (``init_values``) applies ``x + γ ⊙ (block(x) − x)``; its maps carry ``mean |γ|``
(``AttentionMap.gamma``), since with ``γ ≈ 0`` even a structured map changes nothing. For display a map is upsampled
(bilinear) to the letterboxed model input, the letterbox padding is cropped, and the rest resized onto the image.

The fused SDPA kernel returns no weights, so while capturing, a hook re-runs the block with explicit attention
(``explicit_attention_maps``) on the input it received and records the largest difference between that output and the
block's actual output (``AttentionMap.check``, ~1e-6). The explicit weights are computed ``QUERY_CHUNK`` queries at a
time and never held whole: memory grows as ``N · chunk``, not ``N²`` (P3 at 1280 px has N = 25,600 tokens). The model's
own outputs are untouched; hooks are removed on exit, also after an error.

Blocks are found in every layer, also inside the ``nn.Sequential`` Ultralytics builds for a row with ``repeats > 1``;
such a block's maps carry its path in the layer (``AttentionMap.part``, e.g. ``"1"`` for the second repeat).

Statistics (``map_stats``): min, max, mean, std over the feature grid (letterbox padding included: it is what the block
saw); Shannon entropy of the map normalised to sum 1, in nats, and divided by ``ln N`` (``entropy_norm``; 1.0 =
uniform, 0 = one-hot); ``peak_share``, the largest location's share of the mass; ``flag`` = ``uniform`` when the map
stays within 1 % of its mean (``max − min <= 0.01 · |mean|``), ``one-hot`` when ``peak_share >= 0.5``.

Optional ``cam=eigencam`` or ``cam=gradcam`` (needs ``grad-cam``: ``pip install 'attn-yolo[cam]'``) adds a
class-activation map over the layers that feed ``Detect``, also for models without attention blocks.

Which block yields which maps is two tables: ``GATE_MAPS`` (block class → its map kinds and the gates each reads;
``GATE_MAP_FNS`` turns the recorded gates into the map) and ``ATTENTION_WEIGHTS`` (blocks whose attention weights give
``received`` and ``query<k>`` maps).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo.checkpoint import load_model
from attn_yolo.images import default_images, read_image, read_sources
from attn_yolo.nn import CBAM, ECA, EMA, GAM, MHSA, NAM, SAM, SE, CoordAtt, ShuffleAttention, SimAM, TripletAttention
from attn_yolo.nn.sk import SKAttention
from attn_yolo.registry import MODULES

UNIFORM_RTOL = 0.01  # flag "uniform": max − min <= UNIFORM_RTOL · |mean|
ONE_HOT_SHARE = 0.5  # flag "one-hot": one cell holds >= this share of the map's mass
CAM_METHODS = ("eigencam", "gradcam")
MIN_SIDE = 10  # pixels: the smallest image side accepted, as Ultralytics' dataset check (verify_image_label) requires
QUERY_CHUNK = 256  # queries per block of explicit attention weights (explicit_attention_maps)


class HeatmapError(ValueError):
    """Bad input to the heatmap tool: an unreadable image, a bad ``layers=`` value, a model without blocks."""


class NoAttentionError(HeatmapError):
    """The model has no attention block to capture."""


# ------------------------------------------------------------------------------------------------------------ maps --
@dataclass
class AttentionMap:
    """One map a block applied, on its feature grid.

    Attributes:
        layer (int): Ultralytics layer index ``i`` of the block (``-1`` for a CAM).
        block (str): block class name (``CBAM``).
        kind (str): ``spatial``, ``channel``, ``received``, ``query<k>`` (k-th query point) or ``cam``.
        map (np.ndarray): ``(h, w)`` float32, ``>= 0``, on the model-input (letterboxed) grid of the block.
        stride (int): model-input pixels per map cell.
        query (tuple[float, float] | None): ``(x, y)`` original-image pixels of the query point (``kind == "query"``).
        check (float | None): ``MHSA``: max |explicit-attention output − the block's actual output|.
        gamma (float | None): mean ``|γ|`` of the block's residual gate (``init_values``), None without one. The
            block applies ``x + γ ⊙ (block(x) − x)``: with ``γ ≈ 0`` even a structured map changes nothing.
        part (str): the block's path inside layer ``layer``: ``""`` when the layer is the block, ``"1"`` for the
            second block of a row with ``repeats > 1`` (Ultralytics wraps those in an ``nn.Sequential``).
    """

    layer: int
    block: str
    kind: str
    map: np.ndarray
    stride: int
    query: tuple[float, float] | None = None
    check: float | None = None
    gamma: float | None = None
    part: str = ""
    stats: dict = field(init=False)

    def __post_init__(self):
        self.stats = map_stats(self.map)

    @property
    def where(self) -> str:
        """The block's place in the model: ``"6"``, or ``"6.1"`` for the second repeat of layer 6."""
        return f"{self.layer}.{self.part}" if self.part else str(self.layer)

    @property
    def name(self) -> str:
        """File-name friendly id, e.g. ``L06_CBAM_spatial``, ``L06.1_CBAM_spatial`` or ``L15_MHSA_query0``."""
        if self.layer < 0:
            return f"{self.block}_{self.kind}"
        return f"L{self.layer:02d}{'.' + self.part if self.part else ''}_{self.block}_{self.kind}"


def map_stats(m: np.ndarray) -> dict:
    """Statistics that expose a collapsed map.

    Args:
        m: map ``(h, w)``, values ``>= 0`` (negative values are clipped to 0 for the entropy).

    Returns:
        dict: ``min``, ``max``, ``mean``, ``std``; ``entropy_nats`` of ``p = m / Σm`` (``-Σ p ln p``; a map summing
        to 0 counts as uniform); ``entropy_norm = entropy_nats / ln N`` (1.0 uniform, 0.0 one-hot; 1.0 when N = 1);
        ``peak_share = max p``; ``flag``: ``"uniform"`` if ``max − min <= 0.01·|mean|`` (flat to 1 %),
        ``"one-hot"`` if ``peak_share >= 0.5`` (half the mass in one cell), else ``""``.
    """
    v = np.asarray(m, np.float64).ravel()
    n = v.size
    pos = np.clip(v, 0, None)
    total = pos.sum()
    p = pos / total if total > 0 else np.full(n, 1.0 / n)
    nz = p[p > 0]
    h = float(-(nz * np.log(nz)).sum())
    lo, hi, mean = float(v.min()), float(v.max()), float(v.mean())
    peak = float(p.max())
    flag = "uniform" if hi - lo <= UNIFORM_RTOL * abs(mean) else "one-hot" if peak >= ONE_HOT_SHARE and n > 1 else ""
    return {
        "min": lo,
        "max": hi,
        "mean": mean,
        "std": float(v.std()),
        "entropy_nats": h,
        "entropy_norm": h / math.log(n) if n > 1 else 1.0,
        "peak_share": peak,
        "flag": flag,
    }


def on_input(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """A recorded gate ``g`` in a layout that broadcasts against the block input ``x`` ``(B, C, H, W)``.

    ``(B, C)``, ``(B, 1, C)`` (ECA): ``(B, C, 1, 1)``. ``(B, k, P, Q)``: as is, with ``P ∈ {1, H}``, ``Q ∈ {1, W}``
    and ``k ∈ {1, C}``. A grouped gate ``(B·G, k, P, Q)`` (the block reshaped ``x`` to ``(B·G, C/G, H, W)``):
    ``(B, G·k, P, Q)``, each group's value repeated over its ``C/G`` channels when ``k = 1`` (EMA).
    """
    b, c = x.shape[:2]
    g = g.detach().float()
    if g.dim() < x.dim():
        return g.reshape(b, -1, 1, 1)
    g = g.reshape(b, -1, *g.shape[2:])
    return g if g.shape[1] in (1, c) else g.repeat_interleave(c // g.shape[1], 1)


def gain_map(x: torch.Tensor, *gates: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Per-location gain of gates applied to ``x``: ``G(h, w) = Σ_c s_c(h, w) |x_c(h, w)| / Σ_c |x_c(h, w)|``.

    ``s = Π gates`` (each brought to ``x``'s layout by ``on_input``): the fraction of the feature magnitude at
    ``(h, w)`` that passes, ``‖x(h,w) ⊙ s(h,w)‖₁ / ‖x(h,w)‖₁``. For a channel gate ``s ∈ [0, 1]^C`` this is the
    ``channel`` map; for an element-wise gate it is the magnitude-weighted mean gate over the channels at ``(h, w)``.

    Args:
        x: gate input ``(B, C, H, W)``.
        gates: gates in ``[0, 1]``, any layout ``on_input`` accepts; their product is applied to ``x``.
        eps: added to the denominator (a location with ``x = 0`` gets 0).

    Returns:
        ``(B, H, W)`` in ``[min s, max s]``.
    """
    a = x.detach().float().abs()
    s = math.prod(on_input(x, g) for g in gates)
    return (a * s).sum(1) / (a.sum(1) + eps)


def shuffle_half(x: torch.Tensor, g: torch.Tensor, half: int) -> torch.Tensor:
    """The channels of ``x`` ``(B, C, H, W)`` that a ShuffleAttention gate ``g`` ``(B·G, c, P, Q)`` multiplies:
    half ``half`` (0: channel gate, 1: spatial gate) of each of the ``G`` groups, ``(B, G·c, H, W)``."""
    b, _, h, w = x.shape
    groups = g.shape[0] // b
    return x.reshape(b, groups, 2, -1, h, w)[:, :, half].reshape(b, -1, h, w)


GATE_MAPS: dict[type, dict[str, tuple[str, ...]]] = {
    SE: {"channel": ("gain", "gate")},
    ECA: {"channel": ("gain", "gate")},
    SAM: {"spatial": ("plane", "spatial.gate")},
    CBAM: {"channel": ("gain", "channel.gate"), "spatial": ("plane", "spatial.gate")},
    CoordAtt: {"coord": ("gain", "gate_h", "gate_w")},
    EMA: {"gain": ("gain", "gate")},
    SimAM: {"gain": ("gain", "gate")},
    GAM: {"channel": ("gain", "gate_c"), "spatial": ("after", "gate_c", "gate_s")},
    ShuffleAttention: {"channel": ("half0", "gate_c"), "spatial": ("half1", "gate_s")},
    TripletAttention: {"cw": ("cw", "cw.gate"), "hc": ("hc", "hc.gate"), "hw": ("plane", "hw.gate")},
    NAM: {"gain": ("gain", "gate")},
    SKAttention: {"large": ("large", "select")},
}
"""Block class → ``{map kind: (GATE_MAP_FNS key, path of each gate submodule it reads)}``, in display order. A hook
records each gate's output; ``GATE_MAP_FNS[key](x, *gates)`` turns them into the map. Adding a gated block is one
entry here. What each block's maps are (all computed from the gates the block applied, on its input ``x``):

- ``CoordAtt`` ``coord``: the gain of the combined gate ``g_h ⊙ g_w`` (``(B, C, H, 1) ⊙ (B, C, 1, W)``), one map,
  since the block applies only their product; each factor alone is a 1-D profile that says nothing per location.
- ``EMA`` ``gain``: its final gate ``σ(M)`` ``(B·G, 1, H, W)``, one spatial map per group, as the gain over all channels
  (each group's map weighted by its channels' magnitude); equal to ``σ(M)`` itself when ``G = 1``.
- ``SimAM``, ``NAM`` ``gain``: the element-wise gate ``(B, C, H, W)`` as the gain over channels.
- ``GAM`` ``channel``: the gain of ``gate_c`` over ``x``; ``spatial``: the gain of ``gate_s`` over what ``gate_c``
  passed (``x ⊙ gate_c``, the input ``gate_s`` multiplies).
- ``ShuffleAttention`` ``channel`` / ``spatial``: the gain of ``gate_c`` / ``gate_s`` over the half of each group's
  channels that gate multiplies (before the shuffle, which only reorders channels).
- ``TripletAttention`` ``cw`` / ``hc``: the ``(C, W)`` and ``(H, C)`` branch gates rotated back to ``(B, C, 1, W)`` and
  ``(B, C, H, 1)``, as the gain over ``x``; ``hw``: the ``(H, W)`` branch gate itself. The block applies their mean,
  whose gain is the mean of the three maps.
- ``SKAttention`` ``large``: its kernel selection ``a`` ``(B, M, C, 1, 1)`` (softmax over the ``M`` branches) for
  the largest kernel, as the gain over ``x``: the magnitude-weighted share of the channels at each location that the
  block takes from its largest kernel (1: all from it; ``1 / M``: no preference). The selection is per channel, so
  the map shows where the channels that prefer the large receptive field are active.
"""

GATE_MAP_FNS = {
    "gain": gain_map,  # gates in any on_input layout, their product over the block input x → (B, H, W)
    "plane": lambda x, g: g.detach().float()[:, 0],  # gate (B, 1, H, W) → (B, H, W)
    "after": lambda x, g1, g2: gain_map(x * on_input(x, g1), g2),  # g2 applied to x ⊙ g1 (GAM)
    "half0": lambda x, g: gain_map(shuffle_half(x, g, 0), g),  # ShuffleAttention: channel-gate half
    "half1": lambda x, g: gain_map(shuffle_half(x, g, 1), g),  # ShuffleAttention: spatial-gate half
    "cw": lambda x, g: gain_map(x, g.transpose(1, 2)),  # Triplet (B, 1, C, W) → (B, C, 1, W)
    "hc": lambda x, g: gain_map(x, g.permute(0, 3, 2, 1)),  # Triplet (B, 1, H, C) → (B, C, H, 1)
    "large": lambda x, a: gain_map(x, a[:, -1]),  # SKAttention: selection (B, M, C, 1, 1) of the largest kernel
}
"""``GATE_MAPS`` key → ``fn(x, *gates)``: the map ``(B, H, W)`` from the block input ``x`` ``(B, C, H, W)`` and the
recorded gate outputs."""

ATTENTION_WEIGHTS = (MHSA,)
"""Blocks whose ``tokens_forward(x)`` computes its attention through ``self.attend(q, k, v) -> (out, weights)`` on
``(B, heads, N, d)`` tensors, and gates its output with ``self.scale``: maps ``received`` and ``query<k>``
(``explicit_attention_maps``)."""


def attention_rows(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Explicit attention weights ``softmax(QKᵀ/√d)`` of the queries ``q`` ``(B, h, n, d)`` over the keys ``k``
    ``(B, h, N, d)``: ``(B, h, n, N)``, each row summing to 1 (the arithmetic of ``MHSA.attend`` with
    ``fused = False``)."""
    return ((q * (1 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)).softmax(-1)


@torch.no_grad()
def explicit_attention_maps(block: nn.Module, x: torch.Tensor, chunk: int = QUERY_CHUNK) -> tuple[torch.Tensor, dict]:
    """Re-run an ``ATTENTION_WEIGHTS`` block with explicit softmax attention, ``chunk`` queries at a time.

    The block's own ``attend`` is replaced for this one call (restored after, also on error) by one that computes the
    weights of ``chunk`` queries, ``(B, h, chunk, N)``, uses them for those queries' outputs and adds them into the
    attention each location receives, then drops them. The ``N×N`` matrix never exists.

    Peak memory: the block's own activations, ``O(B·N·C)``, plus one weight block and its softmax, about
    ``2 · B·h·chunk·N`` floats: ``O(N · chunk)``. For P3 of a 1280-px input (N = 25,600 tokens, h = 4, fp32) with
    ``chunk = 256`` that is 2 × 105 MB, where the whole matrix would take 2 × 10.5 GB (measured on CPU: 216 MiB
    extra peak resident memory for the whole call).

    Args:
        block: an ``ATTENTION_WEIGHTS`` block (``MHSA``), in eval mode (attention dropout is not applied).
        x: its input ``(B, C, H, W)``.
        chunk: queries per weight block, ``>= 1``.

    Returns:
        ``(y, maps)``: the block output ``(B, C, H, W)`` with explicit attention (equal to the fused output up to
        float rounding), and ``{"received": (B, N)`` attention each location receives, averaged over heads and
        queries (sums to 1), ``"q"``, ``"k"``: ``(B, h, N, d)`` for single query rows (``attention_rows``)``}``.
    """
    from attn_yolo.nn.layer_scale import gated

    maps = {}

    def attend(q, k, v):
        b, h, n, _ = q.shape
        out, received = torch.empty_like(q), q.new_zeros(b, n, dtype=torch.float32)
        for s in range(0, n, chunk):
            w = attention_rows(q[:, :, s : s + chunk], k)  # (B, h, chunk, N)
            out[:, :, s : s + chunk] = w @ v
            received += w.float().sum((1, 2))
            del w
        maps.update(received=received / (h * n), q=q, k=k)
        return out, None

    block.attend = attend  # instance attribute: shadows the method for this call only
    try:
        y, _ = block.tokens_forward(x)
    finally:
        del block.attend
    return gated(x, y, block.scale), maps


def block_gates(block: nn.Module) -> dict[str, nn.Module]:
    """``{gate path: gate submodule}`` of a block, for every gate its ``GATE_MAPS`` maps read; empty without gates."""
    kinds = next((g for cls, g in GATE_MAPS.items() if isinstance(block, cls)), {})
    return {p: block.get_submodule(p) for _, *paths in kinds.values() for p in paths}


def block_maps(block: nn.Module) -> dict[str, tuple[str, ...]]:
    """``{map kind: (GATE_MAP_FNS key, gate paths...)}`` of a block (``GATE_MAPS``); empty for a block without gates."""
    return next((g for cls, g in GATE_MAPS.items() if isinstance(block, cls)), {})


# ------------------------------------------------------------------------------------------------------ the model --
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


def _blocks_in(module: nn.Module, path: str = ""):
    """``(path, block)`` for every attention block in ``module``: the outermost ones (CBAM's gates are parts of it)."""
    if isinstance(module, tuple(MODULES.values())):
        yield path, module
        return
    for name, child in module.named_children():
        yield from _blocks_in(child, f"{path}.{name}" if path else name)


def attention_blocks(model) -> dict[tuple[int, str], nn.Module]:
    """``{(layer index, path in the layer): block}`` for every attention block (``attn_yolo.MODULES``) of the model.

    The path is ``""`` when the layer is the block itself, ``"0"``, ``"1"``, ... for the blocks of a row with
    ``repeats > 1`` (Ultralytics builds those as an ``nn.Sequential``), or the submodule path where a layer holds a
    block deeper inside.
    """
    return {(i, path): m for i, layer in enumerate(as_model(model).model) for path, m in _blocks_in(layer)}


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


# ---------------------------------------------------------------------------------------------------------- capture --
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
            if isinstance(module, ATTENTION_WEIGHTS):
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
                add(kind, GATE_MAP_FNS[fn](x, *(rec["gate:" + p] for p in paths))[b])
            if isinstance(block, ATTENTION_WEIGHTS):
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


# ------------------------------------------------------------------------------------------------------ per image --
@dataclass
class ImageHeatmaps:
    """Heatmaps of one image.

    Attributes:
        path (Path): the image file.
        image (np.ndarray): the original BGR image ``(H0, W0, 3)``.
        input_shape (tuple[int, int]): the letterboxed model input ``(H, W)``.
        result: ``ultralytics.engine.results.Results`` with the detections (original-image coordinates).
        maps (list[AttentionMap]): captured maps, in layer order (CAM last).
        name (str): the image as named in outputs: its file name, or, where several images of one call share a file
            name, its path relative to their common folder (``a/img.jpg``, ``b/img.jpg``); see ``image_names``.
        stem (str): prefix of its output files (``<stem>_heatmaps.png``), unique among the images of one call.
    """

    path: Path
    image: np.ndarray
    input_shape: tuple[int, int]
    result: object
    maps: list[AttentionMap]
    name: str = ""
    stem: str = ""

    def __post_init__(self):
        self.name = self.name or self.path.name
        self.stem = self.stem or self.path.stem

    def on_image(self, m: AttentionMap) -> np.ndarray:
        """``m.map`` resized onto the original image ``(H0, W0)``: bilinear to the model input, letterbox padding
        cropped, resized to the image (``ultralytics.utils.ops.scale_masks``)."""
        from ultralytics.utils import ops

        t = torch.from_numpy(m.map)[None, None].float()
        t = F.interpolate(t, self.input_shape, mode="bilinear", align_corners=False)
        return ops.scale_masks(t, self.image.shape[:2])[0, 0].numpy()


def image_names(files: list[Path]) -> list[tuple[str, str]]:
    """``(name, stem)`` per image for outputs, so that no two images write the same files.

    An image whose file stem no other image has keeps its file name and stem (``bus.jpg``, ``bus``). Images that
    share a stem are named by their path relative to the common folder of those images (``a/img.jpg``, stem
    ``a_img``), keeping the suffix in the stem where that alone differs (``img.jpg`` and ``img.png``: ``img_jpg``,
    ``img_png``); the same file given twice gets ``-2``, ``-3``, ... appended.
    """
    files = [Path(f) for f in files]
    stems = [f.stem for f in files]
    out = [(f.name, f.stem) for f in files]
    for stem in {s for s in stems if stems.count(s) > 1}:
        group = [k for k, s in enumerate(stems) if s == stem]
        root = Path(os.path.commonpath([str(files[k].resolve().parent) for k in group]))
        rel = {k: files[k].resolve().relative_to(root) for k in group}
        plain = {k: "_".join(rel[k].with_suffix("").parts) for k in group}
        for k in group:
            unique = list(plain.values()).count(plain[k]) == 1
            out[k] = (rel[k].as_posix(), plain[k] if unique else "_".join(rel[k].parts).replace(".", "_"))
    seen: dict[str, int] = {}
    for k, (name, stem) in enumerate(out):
        seen[stem] = seen.get(stem, 0) + 1
        if seen[stem] > 1:
            out[k] = (f"{name} ({seen[stem]})", f"{stem}-{seen[stem]}")
    return out


def _letterbox_gain_pad(shape0, shape1) -> tuple[float, float, float, float]:
    """``(gain_x, gain_y, pad_x, pad_y)`` of a centred Ultralytics letterbox from ``shape0`` to ``shape1`` (H, W)."""
    gain = min(shape1[0] / shape0[0], shape1[1] / shape0[1])
    new_h, new_w = (max(round(s * gain), 1) for s in shape0[:2])
    pad_x, pad_y = round((shape1[1] - new_w) / 2 - 0.1), round((shape1[0] - new_h) / 2 - 0.1)
    return new_w / shape0[1], new_h / shape0[0], pad_x, pad_y


def letterbox(model: nn.Module, image: np.ndarray, imgsz: int) -> torch.Tensor:
    """Model input ``(1, 3, H, W)`` of a BGR image as Ultralytics' predictor makes it for ``.pt`` models: minimal
    rectangle ``LetterBox(imgsz, auto=True, stride)`` (sides multiples of the model stride), RGB, ``/255``, on the
    model's device and dtype. ``imgsz`` is rounded up to a multiple of the stride, with Ultralytics' warning."""
    from ultralytics.data.augment import LetterBox
    from ultralytics.utils.checks import check_imgsz

    p = next(model.parameters())
    stride = int(max(getattr(model, "stride", torch.tensor([32.0])).max(), 32))
    im = LetterBox(check_imgsz(imgsz, stride=stride), auto=True, stride=stride)(image=image)  # rounds up as predict
    return torch.from_numpy(np.ascontiguousarray(im[..., ::-1].transpose(2, 0, 1)))[None].to(p.device, p.dtype) / 255


@torch.no_grad()
def predict_with_maps(
    model,
    image: np.ndarray,
    *,
    layers="all",
    imgsz: int = 640,
    conf: float = 0.25,
    iou: float = 0.7,
    query=None,
    max_queries: int = 3,
    path: str | Path = "image.jpg",
    capture: bool = True,
) -> ImageHeatmaps:
    """Predict on one BGR image while capturing the attention maps.

    Preprocessing as Ultralytics' predictor for ``.pt`` models (``LetterBox(imgsz, auto=True, stride)``, RGB, /255),
    postprocessing with its NMS and ``scale_boxes``; detections in an Ultralytics ``Results``.

    Args:
        model: checkpoint path, ``YOLO`` or its ``nn.Module`` (put in eval mode for the call, mode restored after).
        image: BGR ``(H0, W0, 3)`` uint8.
        layers: ``"all"`` or layer indices (see ``resolve_layers``).
        imgsz: inference size (long side), pixels.
        conf, iou: NMS thresholds.
        query: MHSA query points: None, ``"det"`` (the centres of the ``max_queries`` most confident detections) or a
            list of ``(x, y)`` original-image pixels.
        path: image path stored in the ``Results``.
        capture: False: detections only, no maps (a model without attention blocks).
    """
    from ultralytics.engine.results import Results
    from ultralytics.utils import nms, ops

    model = as_model(model)
    x = letterbox(model, image, imgsz)
    was_training = model.training
    model.eval()
    try:
        with AttentionCapture(model, layers) if capture else contextlib.nullcontext() as cap:
            preds = model(x)
    finally:
        model.train(was_training)
    det = nms.non_max_suppression(preds, conf, iou, max_det=300, end2end=getattr(model, "end2end", False))[0]
    det[:, :4] = ops.scale_boxes(x.shape[2:], det[:, :4], image.shape)  # original-image pixels, clipped
    if _is_det(query):
        points = [((x1 + x2) / 2, (y1 + y2) / 2) for x1, y1, x2, y2 in det[:max_queries, :4].tolist()]
        if not len(det) and capture:
            from ultralytics.utils import LOGGER

            LOGGER.warning(f"heatmap: query=det, but {Path(path).name} has no detection above conf={conf}: no query "
                           "map for it (lower conf=, or give x,y points)")
    else:
        points = _points(query) if query else []
    gx, gy, px, py = _letterbox_gain_pad(image.shape, x.shape[2:])
    maps = cap.maps(0, [((qx * gx + px, qy * gy + py), (qx, qy)) for qx, qy in points]) if capture else []
    names = getattr(model, "names", None) or {i: str(i) for i in range(int(det[:, 5].max()) + 1 if len(det) else 0)}
    result = Results(image, path=str(path), names=names, boxes=det[:, :6].cpu())
    return ImageHeatmaps(Path(path), image, tuple(x.shape[2:]), result, maps)


def _is_det(query) -> bool:
    """``query`` asks for the detections' centres (``"det"``)."""
    return isinstance(query, str) and query.lower() in ("det", "dets", "detections")


def _points(query) -> list[tuple[float, float]]:
    """``(x, y)`` pairs from ``"x,y"``, ``(x, y)`` or a list of pairs."""
    try:
        if isinstance(query, str):
            v = [float(t) for t in query.replace("(", "").replace(")", "").split(",")]
        else:
            v = np.asarray(query, float).ravel().tolist()
        if not v or len(v) % 2:
            raise ValueError
    except (TypeError, ValueError):
        raise HeatmapError(f"query={query!r}: expected None, 'det' or x,y pixel coordinates") from None
    return [(float(a), float(b)) for a, b in zip(v[0::2], v[1::2])]


def heatmaps(
    model,
    source=None,
    *,
    layers="all",
    imgsz: int = 640,
    conf: float = 0.25,
    iou: float = 0.7,
    query=None,
    cam: str | None = None,
    device=None,
    trust: bool = False,
) -> list[ImageHeatmaps]:
    """Attention maps (and detections) for every image of ``source``.

    Args:
        model: checkpoint path (``best.pt``), ``YOLO`` object or its ``nn.Module``. Never trained or changed (except
            moved to ``device`` if one is given).
        source: image file, folder, glob, or a list of them; None: the first 2 validation images of the model's own
            dataset when it is at hand (``images.default_images``), else Ultralytics' ``bus.jpg`` and ``zidane.jpg``.
        layers: ``"all"`` (default) or attention layer indices.
        imgsz: inference size, pixels. conf, iou: NMS thresholds.
        query: MHSA query points: None, ``"det"`` or ``(x, y)`` original-image pixels.
        cam: None, ``"eigencam"`` or ``"gradcam"`` (needs ``grad-cam``): adds a ``cam`` map per image.
        device: None (keep the model where it is) or a device string (``"cpu"``, ``"0"``).
        trust: unpickle a checkpoint path fully (may run code it contains); by default it loads weights-only and a
            checkpoint referencing other classes is refused.

    Returns:
        list[ImageHeatmaps], one per image.

    Raises:
        HeatmapError: refused checkpoint, unreadable image or one with a side under ``MIN_SIDE`` px (or too thin to
            letterbox at ``imgsz``), bad ``layers``/``query``/``cam``; ``NoAttentionError`` for a model without
            attention blocks when ``cam`` is None.
    """
    net = as_model(model, trust)
    if cam is not None and str(cam).lower() not in CAM_METHODS:
        raise HeatmapError(f"cam={cam!r}: expected one of {', '.join(CAM_METHODS)} (or none)")
    if cam is not None and importlib.util.find_spec("pytorch_grad_cam") is None:
        raise HeatmapError(f"cam={cam} needs the grad-cam library: pip install 'attn-yolo[cam]'")
    has_blocks = bool(attention_blocks(net))
    if has_blocks or cam is None:
        resolve_layers(net, layers)  # fail before reading any image
    if device is not None:
        from ultralytics.utils.torch_utils import select_device

        net.to(select_device(str(device), verbose=False))
    from ultralytics.utils.checks import check_imgsz

    imgsz = check_imgsz(imgsz, stride=int(max(getattr(net, "stride", torch.tensor([32.0])).max(), 32)))  # 1 warning
    files = default_images(net)[0] if source is None else read_sources(source, HeatmapError)
    images = [read_image(f, HeatmapError) for f in files]  # fail on a bad file before any work
    for f, im in zip(files, images):
        h, w = im.shape[:2]
        if min(h, w) < MIN_SIDE:
            raise HeatmapError(f"image {str(f)!r} is {h}×{w} (H×W); each side must be at least {MIN_SIDE} px")
        if round(min(h, w) * imgsz / max(h, w)) < 1:
            raise HeatmapError(
                f"image {str(f)!r} is {h}×{w} (H×W): at imgsz={imgsz} its short side scales to 0 px; "
                f"crop it or use a larger imgsz="
            )
        for qx, qy in [] if query is None or _is_det(query) else _points(query):
            if not (0 <= qx < w and 0 <= qy < h):
                raise HeatmapError(f"query={query!r}: point ({qx:g}, {qy:g}) lies outside image {str(f)!r}, which is "
                                   f"{h}×{w} (H×W); allowed: 0 <= x < {w}, 0 <= y < {h} (original-image pixels)")
    items = []
    for f, im, (name, stem) in zip(files, images, image_names(files)):
        if has_blocks:
            item = predict_with_maps(net, im, layers=layers, imgsz=imgsz, conf=conf, iou=iou, query=query, path=f)
        else:
            item = predict_with_maps(net, im, layers=None, imgsz=imgsz, conf=conf, iou=iou, path=f, capture=False)
        if cam is not None:
            item.maps.append(class_activation_map(net, im, str(cam).lower(), imgsz=imgsz, conf=conf))
        item.name, item.stem = name, stem
        items.append(item)
    return items


# ----------------------------------------------------------------------------------------------------------- CAM --
def class_activation_map(model, image: np.ndarray, method: str = "eigencam", *, imgsz: int = 640, conf: float = 0.25):
    """EigenCAM or Grad-CAM (``pytorch_grad_cam``) over the layers feeding ``Detect``, as an ``AttentionMap``.

    The detector output is reduced to one tensor ``(B, 4 + nc, anchors)``; Grad-CAM's scalar target is the sum of the
    best class score of every anchor scoring ``>= conf`` (the single best anchor if none does). Gradients flow from a
    ``requires_grad`` input, so a loaded checkpoint with frozen parameters works; the parameters are not changed.

    Raises:
        HeatmapError: ``grad-cam`` is not installed, or an unknown ``method``.
    """
    try:
        from pytorch_grad_cam import EigenCAM, GradCAM
    except ImportError:
        raise HeatmapError("cam= needs the grad-cam library: pip install 'attn-yolo[cam]'") from None
    if method not in CAM_METHODS:
        raise HeatmapError(f"cam={method!r}: expected one of {', '.join(CAM_METHODS)}")
    net = as_model(model)
    head = net.model[-1]
    targets_layers = [net.model[j] for j in (head.f if isinstance(head.f, list) else [head.f])]
    x = letterbox(net, image, imgsz)

    class Scores(nn.Module):  # detector → one tensor (B, 4 + nc, anchors), as grad-cam expects
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, t):
            y = self.m(t)
            return y[0] if isinstance(y, tuple | list) else y

    def target(out):  # (4 + nc, anchors) → scalar
        s = out[4:].amax(0)
        keep = s >= conf
        return s[keep].sum() if keep.any() else s.max()

    was_training, params = net.training, list(net.parameters())
    frozen = [q.requires_grad for q in params]
    net.eval().requires_grad_(False)  # gradients reach the activations through the input; no .grad on the weights
    head.shape = None  # rebuild Detect's anchor cache inside the graph (a cache made under inference_mode breaks it)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            cls = EigenCAM if method == "eigencam" else GradCAM
            with cls(model=Scores(net), target_layers=targets_layers) as c:
                grey = c(input_tensor=x.clone().requires_grad_(True), targets=[target])[0]
    finally:
        net.train(was_training)
        for q, r in zip(params, frozen):
            q.requires_grad_(r)
    h, w = x.shape[2:]
    return AttentionMap(
        -1,
        "EigenCAM" if method == "eigencam" else "GradCAM",
        "cam",
        cv2.resize(grey.astype(np.float32), (w // 8, h // 8), interpolation=cv2.INTER_AREA),
        8,
    )
