"""Transformer-style multi-head self-attention block over a feature map, on fused scaled dot-product attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_int, is_number
from attn_yolo.nn.declaration import Param, Signature, declare, fixed, hp, int_in, positive_int, unused
from attn_yolo.nn.layer_scale import LayerScale, gated

MAX_MLP_RATIO = 16
"""Largest feed-forward expansion ``mlp_ratio`` accepted (ViT uses 4): a larger one is a typo, not a design."""


def _heads_inside(c: int) -> dict:
    """MHSA's default inside a bottleneck: its 4 heads where the width allows head width >= 8, else 2 or 1."""
    return {"heads": next(h for h in (4, 2, 1) if c % h == 0 and (c // h >= 8 or h == 1))}


@declare(
    "MHSA",
    paper="Vaswani et al., Attention Is All You Need, NeurIPS 2017 (multi-head self-attention over the map's tokens)",
    params=(
        Param("heads", "an int >= 1 dividing C (or head_dim)", (int_in(1, 64), "1..64 heads")),
        Param("mlp_ratio", "a number >= 0 (0: no MLP)"),
        Param("attn_drop", "a number in [0, 1)"),
        Param("head_dim", "None (C // heads) or an int >= 1"),
    ),
    aliases=("MultiHeadSelfAttention",),
    signatures=(
        # cv-attention/MHSA.py (BoTNet's MHSA): width/height size a relative position table used only with pos_emb
        Signature("MHSA(n_dims, width=14, height=14, heads=4, pos_emb=False)", "cv-attention (BoTNet's MHSA)", (
            unused("width", 14, positive_int), unused("height", 14, positive_int), hp("heads", "heads", 4),
            fixed("pos_emb", (False,), "BoTNet's relative position embeddings sized to one map, which attn_yolo "
                  "does not provide (its MHSA has a depthwise-conv position encoding for any map size)"),
        ), min_args=3),  # with fewer args a row sets only width/height, unused: nothing to read
    ),
    attention_weights=True,
    attends="attend",
    min_opset=14,
    opset_ops="torch.nn.functional.scaled_dot_product_attention: torch's TorchScript ONNX exporter (used by "
    "Ultralytics) maps aten::scaled_dot_product_attention from opset 14 (MatMul, Softmax); LayerNorm, GELU need less",
    example_args=(2,),
    inside=(("heads", "head_dim"), _heads_inside),
)
class MHSA(nn.Module):
    """Multi-head self-attention block over the H·W tokens of a feature map (Vaswani et al., NeurIPS 2017).

    A pre-norm transformer block as in ViT (Dosovitskiy et al., ICLR 2021):

    ::

        x = x + DWConv3x3(x)                        # conditional position encoding (CPE; Chu et al., ICLR 2023)
        t = tokens(x)                               # (B, N, C), N = H·W
        t = t + W_o · SDPA(LN(t) W_q, LN(t) W_k, LN(t) W_v)
        t = t + MLP(LN(t))                          # C → mlp_ratio·C → C, GELU

    Attention is ``torch.nn.functional.scaled_dot_product_attention`` on contiguous ``(B, h, N, d)`` q, k, v of equal
    head width ``d = C / h``, so PyTorch can pick its fused kernels (FlashAttention / memory-efficient on CUDA, the
    flash kernel on CPU) and never materialises the ``N×N`` score matrix. ``fused = False`` switches to the explicit
    ``softmax(QKᵀ/√d)V`` (same weights; used to return attention maps and as a benchmark reference). The position
    encoding is a depthwise conv, so any input size and aspect ratio works (no table sized at build time).
    LayerNorm runs in float32 under fp16/bf16 autocast; SDPA scales before the softmax, so outputs stay finite.

    YAML: ``[-1, 1, MHSA, []]``, ``[-1, 1, MHSA, [heads]]``, ``[-1, 1, MHSA, [heads, mlp_ratio, attn_drop]]``.

    Args:
        c1 (int): channels ``C``.
        heads (int): attention heads ``h``; must divide ``C`` with head width ``C / h >= 8`` (one head if ``C < 16``).
            Default 4.
        mlp_ratio (float): feed-forward expansion, in ``(0, 16]``. Default 2 (as Ultralytics' PSA; ViT uses 4).
        attn_drop (float): dropout on attention weights during training, in ``[0, 1)``. Default 0.
        head_dim (int | None): if set, overrides ``heads`` with ``C // head_dim``; must divide ``C``, ``>= 8``.
        init_values (float | None): residual gate on the whole block, ``y = x + γ ⊙ (block(x) − x)``, ``γ``
            initialised to this value (0.0: identity at init). None (default): the plain block.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; attention weights (``explicit_attention``) ``(B, h, N, N)``.

    Raises:
        AttnBuildError: at build time, if ``heads`` (or ``head_dim``) does not divide ``C`` with head width ``>= 8``,
            or another option is out of range (non-finite, ``mlp_ratio > 16``, ...); the message lists the head counts
            allowed at ``C``.
    """

    def __init__(
        self,
        c1: int,
        heads: int = 4,
        mlp_ratio: float = 2.0,
        attn_drop: float = 0.0,
        head_dim: int | None = None,
        init_values: float | None = None,
    ):
        super().__init__()
        where = check_c1(c1, "MHSA")
        divisors = [h for h in range(1, c1 + 1) if c1 % h == 0 and c1 // h >= 8] or [1]  # head width >= 8
        if head_dim is not None:
            widths = [c1 // h for h in divisors]
            ok = is_int(head_dim) and head_dim in widths
            check(ok, where, "head_dim", head_dim, f"a head width for C={c1}: {widths}")
            heads = c1 // head_dim
        allowed = f"a divisor of C={c1} (head width >= 8): {divisors}"
        check(is_int(heads) and heads in divisors, where, "heads", heads, allowed)
        ok = is_number(mlp_ratio) and 0 < mlp_ratio <= MAX_MLP_RATIO and round(c1 * mlp_ratio) >= 1
        check(ok, where, "mlp_ratio", mlp_ratio, f"a number in (0, {MAX_MLP_RATIO}] with C * mlp_ratio >= 1 (ViT: 4)")
        check(is_number(attn_drop) and 0 <= attn_drop < 1, where, "attn_drop", attn_drop, "a number in [0, 1)")
        check_init_values(init_values, where)
        self.c1, self.heads, self.head_dim, self.attn_drop = c1, heads, c1 // heads, float(attn_drop)
        self.fused = True
        hidden = round(c1 * mlp_ratio)
        self.pos = nn.Conv2d(c1, c1, 3, padding=1, groups=c1)
        self.norm1 = nn.LayerNorm(c1)
        self.qkv = nn.Linear(c1, 3 * c1)
        self.proj = nn.Linear(c1, c1)
        self.norm2 = nn.LayerNorm(c1)
        self.mlp = nn.Sequential(nn.Linear(c1, hidden), nn.GELU(), nn.Linear(hidden, c1))
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def qkv_heads(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project normalised tokens ``(B, N, C)`` to contiguous q, k, v of shape ``(B, h, N, d)`` each (``self.qkv``'s
        output features are q, k, v in that order, each ``h`` heads of ``d``)."""
        b, n, _ = t.shape
        qkv = self.qkv(t).view(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return tuple(u.contiguous() for u in qkv.unbind(0))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Return ``(softmax(QKᵀ/√d) V, weights)``: fused SDPA (weights None) or, if ``not self.fused``, explicit."""
        p = self.attn_drop if self.training else 0.0
        if self.fused:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p), None
        w = ((q * (1 / math.sqrt(self.head_dim))) @ k.transpose(-2, -1)).softmax(-1)
        return F.dropout(w, p) @ v, w

    def tokens_forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The block on ``(B, C, H, W)``: output ``(B, C, H, W)`` and attention weights ``(B, h, N, N)`` or None.

        """
        b, c, h, w = x.shape
        t = (self.pos(x) + x).flatten(2).transpose(1, 2)  # (B, N, C)
        o, weights = self.attend(*self.qkv_heads(self.norm1(t)))
        t = t + self.proj(o.transpose(1, 2).reshape(b, h * w, c))
        t = t + self.mlp(self.norm2(t))
        return t.transpose(1, 2).reshape(b, c, h, w), weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gated(x, self.tokens_forward(x)[0], self.scale)

    @torch.no_grad()
    def explicit_attention(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the block with explicit softmax attention: ``(output (B, C, H, W), weights (B, h, N, N))``.

        The fused kernel returns no weights; this recomputes them with the same parameters (equal to ``forward`` to
        float rounding). Memory grows as ``B·h·N²``: use it for maps, not for inference.
        """
        fused, self.fused = self.fused, False
        try:
            y, w = self.tokens_forward(x)
        finally:
            self.fused = fused
        return gated(x, y, self.scale), w
