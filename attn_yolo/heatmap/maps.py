"""What a map is: the maps each attention block's gates or attention weights give, and their statistics.

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
(``AttentionMap.gamma``), since with ``γ ≈ 0`` even a structured map changes nothing.

The fused SDPA kernel returns no weights, so while capturing, a hook re-runs the block with explicit attention
(``explicit_attention_maps``) on the input it received and records the largest difference between that output and the
block's actual output (``AttentionMap.check``, ~1e-6). The explicit weights are computed ``QUERY_CHUNK`` queries at a
time and never held whole: memory grows as ``N · chunk``, not ``N²`` (P3 at 1280 px has N = 25,600 tokens).

Statistics (``map_stats``): min, max, mean, std over the feature grid (letterbox padding included: it is what the block
saw); Shannon entropy of the map normalised to sum 1, in nats, and divided by ``ln N`` (``entropy_norm``; 1.0 =
uniform, 0 = one-hot); ``peak_share``, the largest location's share of the mass; ``flag`` = ``uniform`` when the map
stays within 1 % of its mean (``max − min <= 0.01 · |mean|``), ``one-hot`` when ``peak_share >= 0.5``.

Which block yields which maps is two tables: ``GATE_MAPS`` (block class → its map kinds and the gates each reads;
``GATE_MAP_FNS`` turns the recorded gates into the map) and ``ATTENTION_WEIGHTS`` (blocks whose attention weights give
``received`` and ``query<k>`` maps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from attn_yolo.nn.declaration import LiveMapping, blocks

UNIFORM_RTOL = 0.01  # flag "uniform": max − min <= UNIFORM_RTOL · |mean|
ONE_HOT_SHARE = 0.5  # flag "one-hot": one cell holds >= this share of the map's mass
QUERY_CHUNK = 256  # queries per block of explicit attention weights (explicit_attention_maps)


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


GATE_MAPS: LiveMapping = LiveMapping(
    lambda: {d.cls: dict(d.gate_maps) for d in blocks(controls=False).values() if d.gate_maps}
)
"""Block class → ``{map kind: (GATE_MAP_FNS key, path of each gate submodule it reads)}``, in display order. A hook
records each gate's output; ``GATE_MAP_FNS[key](x, *gates)`` turns them into the map (a declaration may give the
function itself instead of a key). The declarations' ``gate_maps``; adding a gated block is its declaration. What each
block's maps are (all computed from the gates the block applied, on its input ``x``):

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
- ``LSKA`` ``gain``: its attention map ``A`` is not squashed (any sign and size), so the map is the gain of ``|A|``,
  ``‖x ⊙ A‖₁ / ‖x‖₁`` per location, ``>= 0`` and possibly above 1.
- ``MLCA`` ``gain``: the un-pooled mixed gate ``(B, C, H, W)`` as applied; ``ELA`` ``coord``: ``y^h ⊙ y^w`` as
  ``CoordAtt``; ``CAA`` ``gain``: its element-wise gate ``A``.
- ``SKAttention`` ``large``: its kernel selection ``a`` ``(B, M, C, 1, 1)`` (softmax over the ``M`` branches) for
  the largest kernel, as the gain over ``x``: the magnitude-weighted share of the channels at each location that the
  block takes from its largest kernel (1: all from it; ``1 / M``: no preference). The selection is per channel, so
  the map shows where the channels that prefer the large receptive field are active.
"""

GATE_MAP_FNS = {
    "gain": gain_map,  # gates in any on_input layout, their product over the block input x → (B, H, W)
    "absgain": lambda x, g: gain_map(x, g.abs()),  # an unbounded attention map (LSKA): the gain of |A|
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

ATTENTION_WEIGHTS: LiveMapping = LiveMapping(
    lambda: {d.cls: True for d in blocks(controls=False).values() if d.attention_weights}
)
"""Blocks whose ``tokens_forward(x)`` computes its attention through ``self.attend(q, k, v) -> (out, weights)`` on
``(B, heads, N, d)`` tensors, and gates its output with ``self.scale``: maps ``received`` and ``query<k>``
(``explicit_attention_maps``). The declarations' ``attention_weights``; ``gives_attention_weights(block)`` asks."""


def gives_attention_weights(block: nn.Module) -> bool:
    """True for a block of an ``ATTENTION_WEIGHTS`` class (or a subclass)."""
    return isinstance(block, tuple(ATTENTION_WEIGHTS))


def map_fn(fn):
    """The map function of a ``GATE_MAPS`` entry: a ``GATE_MAP_FNS`` key, or a callable given by the declaration."""
    return fn if callable(fn) else GATE_MAP_FNS[fn]


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
