"""Bi-Level Routing Attention (BiFormer): top-k region routing, then token attention over the routed regions (SDPA)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_int, is_number
from attn_yolo.nn.declaration import (
    CopyDefault,
    Param,
    Signature,
    ch,
    declare,
    fixed,
    hp,
    is_bool,
    is_str,
    positive_int,
    unused,
)
from attn_yolo.nn.layer_scale import LayerScale, gated

MAX_N_WIN = 32
"""Most regions per side accepted (the paper uses 7 at every stage)."""
MAX_SIDE_DWCONV = 11
"""Largest LCE depthwise kernel accepted (the paper uses 5)."""


def region_grid(h: int, w: int, n_win: int) -> tuple[int, int, int, int]:
    """The region grid of an ``h × w`` map: ``(regions down, regions across, region height, region width)``.

    Region size ``s = ceil(h / n_win)`` (likewise for ``w``), regions ``ceil(h / s)``: at most ``n_win`` per side,
    fewer where regions of that size cover the map sooner (8 rows: 4 regions of 2; 30 rows: 6 of 5), and the map is
    zero-padded at the bottom and right to ``regions · s``. No region is padding only. Integer arithmetic only, so a
    traced (ONNX) graph keeps it symbolic in ``h`` and ``w``.
    """
    sh, sw = (h + n_win - 1) // n_win, (w + n_win - 1) // n_win
    return (h + sh - 1) // sh, (w + sw - 1) // sw, sh, sw


BRA_LEGACY = "rayleizhu/BiFormer ops/bra_legacy.py, cv-attention"
BRA_WHO = (f"BiLevelRoutingAttention(dim, n_win=7, num_heads=8, ...) ({BRA_LEGACY}) and its NCHW version use "
           "num_heads=8 and side_dwconv=3")
QK_SCALE = fixed("qk_scale", (None,), "another softmax temperature than 1/sqrt(C), which attn_yolo does not provide",
                 lambda v: v is None or is_number(v))
AUTO_PAD = fixed("auto_pad", (False, True), "", is_bool)  # any map size here: padded to whole regions, pads masked


def region_mean(t: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """Mean over each region's real tokens of ``t`` ``(B, R, S, C)`` (``valid`` ``(R, S)``: 1 real, 0 padding; None:
    all real) → ``(B, R, C)``, as ``first + mean(t − first)`` with ``first`` the region's first token (always real:
    padding is at the bottom and right). Equal to the plain mean; for a region of equal tokens (a letterbox border)
    it is that token exactly in any float precision, so such regions tie exactly in every runtime (OpenVINO's CPU
    plugin runs the float64 routing in float32, where a plain sum of equal values rounds per region size)."""
    first = t[:, :, :1]
    if valid is None:
        return first[:, :, 0] + (t - first).mean(2)
    n = valid.to(t.dtype).sum(1, keepdim=True)  # (R, 1) real tokens per region, >= 1
    return first[:, :, 0] + ((t - first) * valid.to(t.dtype).unsqueeze(-1)).sum(2) / n


@declare(
    "BiLevelRoutingAttention",
    paper="Zhu et al., BiFormer: Vision Transformer with Bi-Level Routing Attention, CVPR 2023",
    params=(
        Param("heads", "None (C/32) or an int >= 1 dividing C", none_means="C/32",
              copies=(CopyDefault(8, BRA_WHO, "heads"),)),
        Param("n_win", f"an int in 1..{MAX_N_WIN} (regions per side)"),
        Param("topk", "an int in 1..n_win² (routed regions)"),
        Param("side_dwconv", f"0 or an odd int in 1..{MAX_SIDE_DWCONV} (local context conv)",
              copies=(CopyDefault(3, BRA_WHO, "side_dwconv"),)),
    ),
    aliases=("BiFormer", "BRA", "BiLevelRoutingAttention_nchw"),  # the last: the BiFormer authors' NCHW class name
    signatures=(
        # rayleizhu/BiFormer ops/bra_nchw.py (the authors' NCHW module): our order
        Signature("BiLevelRoutingAttention_nchw(dim, num_heads=8, n_win=7, qk_scale=None, topk=4, side_dwconv=3, "
                  "auto_pad=False, attn_backend='torch')", "rayleizhu/BiFormer ops/bra_nchw.py", (
                      hp("num_heads", "heads", 8), hp("n_win", "n_win", 7), QK_SCALE, hp("topk", "topk", 4),
                      hp("side_dwconv", "side_dwconv", 3), AUTO_PAD,
                      fixed("attn_backend", ("torch",), "another attention kernel: attn_yolo runs SDPA", is_str),
                  )),
        # rayleizhu/BiFormer ops/bra_legacy.py (the BiFormer models' module) and cv-attention/Biformer.py (there
        # auto_pad=True): n_win before num_heads; the key/value downsampling options are used only with a
        # kv_downsample_mode other than 'identity'
        Signature("BiLevelRoutingAttention(dim, n_win=7, num_heads=8, qk_dim=None, qk_scale=None, ..., topk=4, "
                  "..., side_dwconv=3, auto_pad=False)", BRA_LEGACY, (
                      hp("n_win", "n_win", 7), hp("num_heads", "heads", 8), ch("qk_dim", none_ok=True), QK_SCALE,
                      unused("kv_per_win", 4, positive_int), unused("kv_downsample_ratio", 4, positive_int),
                      unused("kv_downsample_kernel", None, lambda v: v is None or positive_int(v)),
                      fixed("kv_downsample_mode", ("identity",), "key/value downsampling, which attn_yolo does not "
                            "provide", is_str),
                      hp("topk", "topk", 4),
                      fixed("param_attention", ("qkvo",), "attention without its output projection, which attn_yolo "
                            "does not provide", is_str),
                      fixed("param_routing", (False,), "learnable routing, which attn_yolo does not provide"),
                      fixed("diff_routing", (False,), "differentiable routing, which attn_yolo does not provide"),
                      fixed("soft_routing", (False,), "soft routing, which attn_yolo does not provide"),
                      hp("side_dwconv", "side_dwconv", 3), AUTO_PAD,
                  )),
    ),
    min_opset=14,
    opset_ops="scaled_dot_product_attention with a mask (from 14, as MHSA); TopK with k as an input (10), Pad with "
    "the padding computed from H, W (11), Gather of the routed regions",
    example_args=(2, 7),
    attends="attend",
)
class BiLevelRoutingAttention(nn.Module):
    """Bi-Level Routing Attention (Zhu et al., BiFormer: Vision Transformer with Bi-Level Routing Attention, CVPR 2023).

    The attention operator of a BiFormer block (Zhu, Wang, Ke, Zhang, Lau), on ``(B, C, H, W)`` maps:

    ::

        Q, K, V = W_qkv x                                   # 1×1 conv C → 3C (bias)
        Q^r, K^r = region means of Q, K                     # (B, R, C), R regions of S tokens
        A^r = Q^r (K^r)ᵀ;  I^r = topk-index(A^r, k)         # region-to-region routing: k regions per region
        K^g, V^g = gather(K, I^r), gather(V, I^r)           # (B, R, k·S, C)
        O = softmax(Q (K^g)ᵀ / √C) V^g + LCE(V)             # token-to-token attention, per head; LCE: depthwise conv
        y = W_o O                                           # 1×1 conv C → C (bias)

    Every query of a region attends the tokens of the same ``k`` routed regions (one routing for all heads), through
    ``torch.nn.functional.scaled_dot_product_attention`` on contiguous ``(B·R, h, ·, C/h)`` q, k, v (batched per
    region, so the fused kernels apply; the ``R × R`` region affinity is the only explicit product). The routing is
    not differentiable (top-k indices); as in the authors' code, it reads ``Q, K`` detached, so gradients reach them
    through the token attention only (the paper's appendix A).

    Any input size: the region grid is set by ``n_win`` with padding (``region_grid``): region size
    ``ceil(H / n_win)`` × ``ceil(W / n_win)``, the projected map zero-padded at the bottom and right to whole regions,
    and the output cropped back to ``H × W``. At 640×640, P3/P4/P5 (80, 40, 20) get 7×7 regions of 12, 6 and 3
    tokens a side; at 480×800, P3 (60×100) gets 7×7 regions of 9×15, P4 (30×50) 6×7 of 5×8, P5 (15×25) 5×7 of 3×4.

    Differences from the authors' code (``ops/bra_nchw.py``, ``ops/torch/rrsda.py``, and the copies in the YOLO
    collections), by choice:

    - Region size: theirs is ``H // n_win``, which fails on maps under ``n_win`` per side (kernel 0) and leaves a
      region grid larger than ``n_win`` when ``H`` is not a multiple; here ``ceil(H / n_win)`` with padding (above).
    - Padded tokens: their zero-padded keys stay in the softmax (a "TODO: mask padding region"); here they are masked
      out, so the output at a real token equals the attention over real tokens only. Region means average the real
      tokens only, as their ``count_include_pad=False`` pooling does.
    - ``topk`` above the number of regions (small maps) routes to every region (theirs fails in ``torch.topk``).
    - Ties in the region affinity go to the lower region index (row-major), in PyTorch as in ONNX ``TopK``: regions
      of a constant letterbox border have equal means, and ``torch.topk`` breaks such ties arbitrarily. The routing
      runs in float64 (float32 on MPS), where those means are exact: a partial (padded) region of border tokens then
      ties with a full one in every runtime, rather than winning or losing by a rounding that differs per runtime.
      Region means are taken as ``first + mean(t − first)`` (``region_mean``), exact for equal tokens in float32
      too (OpenVINO's CPU plugin runs float64 ops in float32), and the affinity is summed per entry (not a GEMM,
      which may compute two equal columns 1 ulp apart), then rounded to float32 (affinities closer than float32's
      6e-8 relative, below the noise of the float32 ``q, k``, tie too).
    - The temperature is ``1/√C`` with ``C`` the full width, as their code ("to be consistent with old models") and
      the paper's ``softmax(QKᵀ/√C)``, not the per-head ``1/√(C/h)`` of a standard multi-head attention.
    - Heads left at None use the paper's head width 32 (``C // 32`` heads, 1 below 64 channels); their module
      default is 8 heads. LCE kernel 5, as the paper (their module default is 3; their BiFormer models pass 5).
    - The legacy module's options the BiFormer models leave off (key/value downsampling, learnable or soft
      routing) are not provided.
    - Under fp16 autocast the token attention runs in float32 (fp16 scores overflow at large activations); bf16
      keeps its dtype.

    Ultralytics' ``get_flops`` overstates this block's GFLOPs (about twofold at 640): it extrapolates from 1-row
    proxy images, on which every region is one token; ``attn_yolo.ultralytics_api.flops.full_size_gflops`` is exact.

    A dynamic ONNX export keeps the grid symbolic in ``H, W``, but ``k`` is fixed at export: it needs at least
    ``topk`` regions at every size it runs (any map of 2×2 or more with the defaults).

    YAML: ``[-1, 1, BiLevelRoutingAttention, []]``, ``[-1, 1, BiLevelRoutingAttention, [heads, n_win, topk]]`` (the
    authors' argument order after ``dim``).

    Args:
        c1 (int): channels ``C``.
        heads (int | None): attention heads ``h``, a divisor of ``C`` with head width ``C / h >= 8`` (1 if
            ``C < 16``); None (default): ``max(1, C // 32)`` (paper: head width 32), or the nearest allowed below.
        n_win (int): regions per side, an int in ``1..32``. Default 7 (paper).
        topk (int): regions each region attends, an int in ``1..n_win²``. Default 4 (the authors' module default;
            BiFormer uses 1, 4, 16 and all regions in its four stages).
        side_dwconv (int): LCE depthwise kernel, an odd int in ``1..11``, or 0 for no LCE. Default 5 (paper).
        init_values (float | None): residual gate ``y = x + γ ⊙ (BRA(x) − x)``, ``γ`` initialised to this value in
            ``[0, 1]`` (0.0: identity at init). None (default): the operator as in the paper.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``routes(x)``: the routed region indices ``(B, R, k)``.

    Raises:
        AttnBuildError: ``heads``, ``n_win``, ``topk``, ``side_dwconv`` or ``init_values`` out of range, or ``c1``
            invalid; the message lists the head counts allowed at ``C``.
    """

    def __init__(
        self,
        c1: int,
        heads: int | None = None,
        n_win: int = 7,
        topk: int = 4,
        side_dwconv: int = 5,
        init_values: float | None = None,
    ):
        super().__init__()
        where = check_c1(c1, "BiLevelRoutingAttention")
        divisors = [h for h in range(1, c1 + 1) if c1 % h == 0 and c1 // h >= 8] or [1]  # head width >= 8
        if heads is None:
            heads = max(h for h in divisors if h <= max(1, c1 // 32))
        allowed = f"a divisor of C={c1} (head width >= 8): {divisors}, or [] for head width 32 (paper)"
        check(is_int(heads) and heads in divisors, where, "heads", heads, allowed)
        check(is_int(n_win) and 1 <= n_win <= MAX_N_WIN, where, "n_win", n_win, f"an int in 1..{MAX_N_WIN} (paper: 7)")
        ok = is_int(topk) and 1 <= topk <= n_win**2
        check(ok, where, "topk", topk, f"an int in 1..n_win²={n_win**2} (default 4)")
        ok = is_int(side_dwconv) and 0 <= side_dwconv <= MAX_SIDE_DWCONV and (side_dwconv == 0 or side_dwconv % 2)
        check(ok, where, "side_dwconv", side_dwconv, f"0 (no LCE) or an odd int in 1..{MAX_SIDE_DWCONV} (paper: 5)")
        check_init_values(init_values, where)
        self.c1, self.heads, self.n_win, self.topk, self.side_dwconv = c1, heads, n_win, topk, side_dwconv
        self.qk_scale = c1**-0.5
        self.qkv = nn.Conv2d(c1, 3 * c1, 1)
        self.lepe = nn.Conv2d(c1, c1, side_dwconv, padding=side_dwconv // 2, groups=c1) if side_dwconv else None
        self.proj = nn.Conv2d(c1, c1, 1)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def _regions(self, qkv: torch.Tensor):
        """Projected map ``(B, 3C, H, W)`` → tokens by region ``(B, R, S, 3C)``, the grid, and the real-token mask
        ``(R, S)`` (None without padding)."""
        b, c3, h, w = qkv.shape
        nh, nw, sh, sw = region_grid(h, w, self.n_win)
        ph, pw = nh * sh - h, nw * sw - w
        valid = None
        if ph or pw or torch.jit.is_tracing():  # traced: always, so the graph serves sizes with and without padding
            qkv = F.pad(qkv, (0, pw, 0, ph))
            valid = F.pad(qkv.new_ones(1, 1, h, w), (0, pw, 0, ph))
            valid = valid.view(nh, sh, nw, sw).permute(0, 2, 1, 3).reshape(nh * nw, sh * sw)
        t = qkv.view(b, c3, nh, sh, nw, sw).permute(0, 2, 4, 3, 5, 1).reshape(b, nh * nw, sh * sw, c3)
        return t, (nh, nw, sh, sw), valid

    def _route(self, q: torch.Tensor, k: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        """Top-k region indices ``(B, R, k)`` from the region means of ``q, k`` ``(B, R, S, C)`` (real tokens only)."""
        n_regions = q.shape[1]
        topk = self.topk if torch.jit.is_tracing() else min(self.topk, n_regions)
        # float64: a region mean of equal float32 values is then exact, so regions of a constant letterbox border
        # tie exactly in PyTorch and in ONNX alike (in float32 their sums round differently per runtime)
        dtype = torch.float32 if q.device.type == "mps" else torch.float64  # (MPS has no float64)
        with torch.autocast(q.device.type, enabled=False):  # no fp16 products, which would overflow
            q, k = q.detach().to(dtype), k.detach().to(dtype)
            qr, kr = region_mean(q, valid), region_mean(k, valid)
            # (B, R, R) region affinity as products summed over C, each entry by the same reduction: regions of
            # equal means give bit-equal columns (a GEMM need not: on an AMD EPYC torch's float64 GEMM gave the last
            # of 6 tied border regions 1 ulp more, so it won the tie); then rounded to float32 as a second guard
            a = (qr.unsqueeze(2) * kr.unsqueeze(1)).sum(-1).float()
            if torch.jit.is_tracing():  # ONNX TopK puts the lower index first among equal values
                return a.topk(topk, dim=-1).indices
            # the same tie rule in eager mode (torch.topk has none): letterbox borders give regions of equal means
            return a.sort(dim=-1, descending=True, stable=True).indices[..., :topk]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, None]:
        """``(softmax(QKᵀ/√C) V, None)``: each region's queries ``(B·R, h, S, d)`` over its routed keys and values
        ``(B·R, h, k·S, d)``, padded keys masked out (``mask`` ``(B·R, 1, 1, k·S)``, True: real; None: none)."""
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.qk_scale), None

    def attention(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The operator on ``x`` ``(B, C, H, W)``: ``(W_o O (B, C, H, W), routed region indices (B, R, k))``."""
        b, c, h, w = x.shape
        qkv = self.qkv(x)
        t, (nh, nw, sh, sw), valid = self._regions(qkv)
        n_regions, s = nh * nw, sh * sw
        q, kv = t[..., :c], t[..., c:]
        idx = self._route(q, kv[..., :c], valid)  # (B, R, k)
        topk = idx.shape[-1]
        flat = (idx + torch.arange(b, device=x.device).view(b, 1, 1) * n_regions).view(b * n_regions, topk)
        # gather whole regions as rows of a (B·R, S·2C) table: one Gather in ONNX, and on CPU much faster than
        # index_select over a 3-D tensor
        kv = F.embedding(flat, kv.reshape(b * n_regions, s * 2 * c)).view(b * n_regions, topk * s, 2 * c)
        d = c // self.heads

        def heads(z: torch.Tensor) -> torch.Tensor:  # (B·R, n, C) → contiguous (B·R, h, n, d)
            return z.reshape(z.shape[0], z.shape[1], self.heads, d).transpose(1, 2).contiguous()

        qh, kh, vh = heads(q.reshape(b * n_regions, s, c)), heads(kv[..., :c]), heads(kv[..., c:])
        mask = None if valid is None else valid.bool()[idx].view(b * n_regions, 1, 1, topk * s)
        if qh.dtype == torch.float16:
            qh, kh, vh = qh.float(), kh.float(), vh.float()
        o = self.attend(qh, kh, vh, mask)[0].to(qkv.dtype)
        o = o.transpose(1, 2).reshape(b, nh, nw, sh, sw, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, nh * sh, nw * sw)
        o = o[:, :, :h, :w]
        if self.lepe is not None:
            o = o + self.lepe(qkv[:, 2 * c :])
        return self.proj(o), idx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gated(x, self.attention(x)[0], self.scale)

    @torch.no_grad()
    def routes(self, x: torch.Tensor) -> torch.Tensor:
        """The region indices ``(B, R, k)`` each region attends (regions in row-major order of ``region_grid``)."""
        return self.attention(x)[1]
