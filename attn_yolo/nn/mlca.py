"""Mixed Local Channel Attention (MLCA): ECA-style 1-D convs over local and global pooled descriptors, mixed."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_int, is_number
from attn_yolo.nn.declaration import Param, Signature, declare, hp
from attn_yolo.nn.eca import eca_kernel_size
from attn_yolo.nn.layer_scale import LayerScale, gated


def adaptive_pool_matrix(n_in, n_out, like: torch.Tensor) -> torch.Tensor:
    """The ``(n_out, n_in)`` matrix of 1-D adaptive average pooling (``F.adaptive_avg_pool1d``'s windows): row ``i``
    averages inputs ``⌊i·n_in/n_out⌋ … ⌈(i+1)·n_in/n_out⌉ − 1``. Pools (``n_out < n_in``) and un-pools (``>``) alike.

    Built from ``arange`` and comparisons, so an ONNX export keeps ``n_in`` / ``n_out`` dynamic (an adaptive pool
    to a size other than 1 exports only for sizes fixed at export). dtype and device of ``like``.
    """
    i = torch.arange(n_out, device=like.device).unsqueeze(1)
    j = torch.arange(n_in, device=like.device).unsqueeze(0)
    start = torch.div(i * n_in, n_out, rounding_mode="floor")
    end = torch.div((i + 1) * n_in + n_out - 1, n_out, rounding_mode="floor")
    m = ((j >= start) & (j < end)).to(like.dtype)
    return m / m.sum(1, keepdim=True)


def adaptive_avg_pool(x: torch.Tensor, h, w) -> torch.Tensor:
    """``F.adaptive_avg_pool2d(x, (h, w))`` as two small matrix products (separable windows), so an exported graph
    takes any size in or out (pools and un-pools alike). (A non-contiguous ``x`` is copied first: its products would
    otherwise run as ``C`` tiny ones.)

    Shapes: ``(B, C, H, W) -> (B, C, h, w)``.
    """
    ph, pw = adaptive_pool_matrix(x.shape[2], h, x), adaptive_pool_matrix(x.shape[3], w, x)
    return ph @ (x.contiguous() @ pw.T)  # contiguous: PyTorch then folds the batch into single GEMMs


@declare(
    "MLCA",
    paper="Wan et al., Mixed local channel attention for object detection, EAAI 2023",
    params=(Param("local_size", "an int in 1..32"), Param("gamma", "a number > 0"), Param("b", "a finite number"),
            Param("local_weight", "a number in [0, 1]")),
    aliases=("MLCAAttention", "MixedLocalChannelAttention"),
    signatures=(
        # wandahangFY/MLCA (the authors) and cv-attention/MLCA.py: our order and defaults
        Signature("MLCA(in_size, local_size=5, gamma=2, b=1, local_weight=0.5)", "wandahangFY/MLCA, cv-attention", (
            hp("local_size", "local_size", 5), hp("gamma", "gamma", 2), hp("b", "b", 1),
            hp("local_weight", "local_weight", 0.5),
        )),
    ),
    gate_maps={"gain": ("gain", "gate")},
    min_opset=11,
    opset_ops="Range (adaptive pool windows from the input's H, W), Div, Less/GreaterOrEqual, MatMul, 1-D Conv",
)
class MLCA(nn.Module):
    """Mixed Local Channel Attention (Wan et al., "Mixed local channel attention for object detection", EAAI 2023).

    Paper: Wan, Lu, Shen, Xu, Lang, Ren, "Mixed local channel attention for object detection", Engineering
    Applications of Artificial Intelligence 123, 106442, 2023.

    Local average pooling to an ``s×s`` grid (LAP) gives ``L`` ``(B, C, s, s)``; global average pooling of ``L``
    (GAP) gives ``G`` ``(B, C, 1, 1)``. Both go through an ECA 1-D conv of kernel ``k`` (no bias, zero padding):
    ``G`` along its channels, ``L`` flattened position by position into one sequence of ``s²·C`` values (the ``C``
    channels of cell 1, then of cell 2, ...). The gates ``σ(conv(G))`` and ``σ(conv_local(L))`` are mixed,
    ``M = (1 − λ)·σ(conv(G)) + λ·σ(conv_local(L))`` (``G``'s gate spread over the ``s×s`` grid), un-pooled to
    ``H×W`` by adaptive average pooling (UNAP), and ``y = x ⊙ UNAP(M)``.

    Settled by the authors' code (the paper gives the structure): ``k`` = ECA's adaptive rule
    ``|(log2 C + b)/γ|_odd`` with ``γ = 2``, ``b = 1``, the same for both convs; the global descriptor is the mean of
    the ``s×s`` local cells (the global mean when ``s`` divides ``H`` and ``W``); the local sequence is one 1-D conv
    over all ``s²·C`` values, so at a cell boundary the last channels of one cell and the first of the next are
    neighbours, as in their code. One difference: their code spreads ``G``'s gate over the grid with an adaptive pool
    across the batch axis, which mixes images at batch > 1; here each image keeps its own gate (the paper's
    definition; identical at batch 1). LAP and UNAP are ``adaptive_avg_pool`` (matrix products with the same windows
    as ``F.adaptive_avg_pool2d``), so ONNX exports keep any input size.

    YAML: ``[-1, 1, MLCA, []]`` or ``[-1, 1, MLCA, [local_size, gamma, b, local_weight]]`` (the authors' order; a
    leading channel count, ``[256]``, is read as such).

    Args:
        c1 (int): input channels ``C``.
        local_size (int): local grid side ``s``, an int in 1..32. Default 5 (paper).
        gamma (float): ECA kernel rule ``γ``, a number > 0. Default 2.
        b (float): ECA kernel rule ``b``, a number. Default 1.
        local_weight (float): ``λ``, the local gate's share, in ``[0, 1]``. Default 0.5 (paper).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` (identity) outputs ``UNAP(M)`` ``(B, C, H, W)`` in ``[0, 1]``;
        ``self.gate_local`` ``(B, C, s, s)`` and ``self.gate_global`` ``(B, C, 1, 1)``.

    Raises:
        AttnBuildError: a hyperparameter out of range, or ``c1`` invalid.
    """

    def __init__(
        self,
        c1: int,
        local_size: int = 5,
        gamma: float = 2,
        b: float = 1,
        local_weight: float = 0.5,
        init_values: float | None = None,
    ):
        super().__init__()
        where = check_c1(c1, "MLCA")
        ok = is_int(local_size) and 1 <= local_size <= 32
        check(ok, where, "local_size", local_size, "an int in 1..32 (local pooling grid side; paper: 5)")
        check(is_number(gamma) and gamma > 0, where, "gamma", gamma, "a number > 0 (ECA kernel rule; paper: 2)")
        check(is_number(b), where, "b", b, "a finite number (ECA kernel rule; paper: 1)")
        ok = is_number(local_weight) and 0 <= local_weight <= 1
        check(ok, where, "local_weight", local_weight, "a number in [0, 1] (paper: 0.5)")
        check_init_values(init_values, where)
        self.c1, self.local_size, self.local_weight = c1, local_size, float(local_weight)
        self.k = eca_kernel_size(c1, gamma, b)
        self.conv = nn.Conv1d(1, 1, self.k, padding=(self.k - 1) // 2, bias=False)
        self.conv_local = nn.Conv1d(1, 1, self.k, padding=(self.k - 1) // 2, bias=False)
        self.gate_global = nn.Sigmoid()
        self.gate_local = nn.Sigmoid()
        self.gate = nn.Identity()  # marks the un-pooled gate as applied (heatmaps hook it)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        s = self.local_size
        local = adaptive_avg_pool(x, s, s)  # (B, C, s, s)
        g = self.gate_global(self.conv(local.mean((2, 3)).unsqueeze(1)))  # (B, 1, C)
        seq = local.flatten(2).transpose(1, 2).reshape(b, 1, s * s * c)  # cell-major: C channels of each cell
        gl = self.gate_local(self.conv_local(seq).reshape(b, s * s, c).transpose(1, 2).reshape(b, c, s, s))
        m = gl * self.local_weight + g.transpose(1, 2).unsqueeze(-1) * (1 - self.local_weight)  # (B, C, s, s)
        return gated(x, x * self.gate(adaptive_avg_pool(m, h, w)), self.scale)
