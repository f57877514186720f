"""Coordinate Attention (CoordAtt): channel attention factorised into two direction-aware 1-D gates."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, check_r, is_int
from attn_yolo.nn.declaration import CopyDefault, Param, Signature, ch, declare, hp, int_in
from attn_yolo.nn.layer_scale import LayerScale, gated

COORD_WHO = ("CoordAtt(inp, oup, reduction=8) with mip = max(32, inp // reduction) (CoordAtt copies in YOLO "
             "collections) uses reduction=8 and a hidden floor of 32")


@declare(
    "CoordAtt",
    paper="Hou et al., Coordinate Attention for Efficient Mobile Network Design, CVPR 2021",
    params=(
        Param("r", "an int >= 1 (hidden width max(min_hidden, C // r))", (int_in(1, 64), "1..64 (paper: 32)"),
              copies=(CopyDefault(8, COORD_WHO, "r"),)),
        Param("min_hidden", "an int >= 1 (floor of the hidden width)", copies=(CopyDefault(32, COORD_WHO, "hidden"),)),
    ),
    aliases=("CA", "CoordAttention", "CoordinateAttention"),
    alias_notes={"CA": "CA is Coordinate Attention (Hou et al. 2021), not channel attention; for a channel gate "
                 "write SE or ECA"},
    signatures=(
        # houqb/CoordAttention coordatt.py (the authors): an output width oup, equal to inp in every use
        Signature("CoordAtt(inp, oup, reduction=32)", "houqb/CoordAttention", (ch("oup"), hp("reduction", "r", 32))),
        # cv-attention/CoordAttention.py: the same without oup
        Signature("CoordAtt(inp, reduction=32)", "cv-attention", (hp("reduction", "r", 32),)),
        # copies in YOLO collections with the authors' signature, reduction=8 and a hidden floor other than 8
        # (mip = max(32, inp // reduction); 16 and 64 occur too) read as the authors' do; their defaults: copies
    ),
    gate_maps={"coord": ("gain", "gate_h", "gate_w")},
    min_opset=10,
    opset_ops="Slice with the input's H as a dynamic bound (splitting the pooled H and W parts), ReduceMean",
    example_args=(8,),
)
class CoordAtt(nn.Module):
    """Coordinate Attention (Hou, Zhou, Feng, "Coordinate Attention for Efficient Mobile Network Design", CVPR 2021).

    Paper Eqs. 4-9. Average pooling along each spatial direction gives ``z^h_c(h) = 1/W Σ_i x_c(h, i)`` and
    ``z^w_c(w) = 1/H Σ_j x_c(j, w)``; both are concatenated along the spatial axis and sent through one shared 1×1
    conv ``F1`` (``C → M``), BatchNorm and h-swish: ``f = δ(BN(F1([z^h, z^w])))``. ``f`` is split back into ``f^h``,
    ``f^w``; two 1×1 convs ``F_h``, ``F_w`` (``M → C``) and sigmoids give the gates ``g^h = σ(F_h(f^h))`` and
    ``g^w = σ(F_w(f^w))``, and ``y_c(i, j) = x_c(i, j) · g^h_c(i) · g^w_c(j)``.

    Settled by the authors' code (the paper gives only "reduction ratio r" and a non-linearity ``δ``): hidden width
    ``M = max(min_hidden, C // r)`` with ``min_hidden = 8``, ``δ`` = h-swish ``x · ReLU6(x + 3) / 6``
    (``nn.Hardswish``), convs with bias. The two
    directional pools are means over one axis (``ReduceMean`` in ONNX, any input size), not adaptive pools, and the
    BatchNorm sees both directions together, as in the paper, so training statistics match it too.

    Copies in the YOLO collections that default to ``CoordAtt(inp, oup, reduction=8)`` with a hidden floor of 32
    (``mip = max(32, inp // reduction)``) build ``CoordAtt(c1, r=8, min_hidden=32)``
    (the declaration's copies: a row that leaves these out gets the authors' values and a log line with that
    edit).

    YAML: ``[-1, 1, CoordAtt, []]``, ``[-1, 1, CoordAtt, [r]]`` or ``[-1, 1, CoordAtt, [r, min_hidden]]``.

    Args:
        c1 (int): input channels ``C``.
        r (int): reduction ratio, ``>= 1``. Default 32 (paper).
        min_hidden (int): floor of the hidden width ``M``, an int ``>= 1``. Default 8 (the authors' code).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; gates ``self.gate_h`` ``(B, C, H, 1)`` and ``self.gate_w`` ``(B, C, 1, W)``.

    Raises:
        AttnBuildError: ``r`` or ``min_hidden`` not a positive int, or ``c1`` invalid.
    """

    def __init__(self, c1: int, r: int = 32, min_hidden: int = 8, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "CoordAtt")
        check_r(r, where, paper=32)  # hidden = max(min_hidden, C // r): any r >= 1 fits
        ok = is_int(min_hidden) and min_hidden >= 1
        check(ok, where, "min_hidden", min_hidden, "an int >= 1 (floor of the hidden width; authors' code: 8)")
        check_init_values(init_values, where)
        self.c1, self.r, self.min_hidden, self.hidden = c1, r, min_hidden, max(min_hidden, c1 // r)
        self.conv1 = nn.Conv2d(c1, self.hidden, 1)
        self.bn = nn.BatchNorm2d(self.hidden)
        self.act = nn.Hardswish()
        self.conv_h = nn.Conv2d(self.hidden, c1, 1)
        self.conv_w = nn.Conv2d(self.hidden, c1, 1)
        self.gate_h = nn.Sigmoid()
        self.gate_w = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.shape[2]
        z = torch.cat((x.mean(3, keepdim=True), x.mean(2, keepdim=True).transpose(2, 3)), 2)  # (B, C, H + W, 1)
        f = self.act(self.bn(self.conv1(z)))
        gh = self.gate_h(self.conv_h(f[:, :, :h]))  # (B, C, H, 1)
        gw = self.gate_w(self.conv_w(f[:, :, h:]).transpose(2, 3))  # (B, C, 1, W)
        return gated(x, x * gw * gh, self.scale)
