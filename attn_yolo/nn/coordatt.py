"""Coordinate Attention (CoordAtt): channel attention factorised into two direction-aware 1-D gates."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import C1, check_init_values, check_r, in_place_ok, resolve
from attn_yolo.nn.layer_scale import LayerScale, gated


class CoordAtt(nn.Module):
    """Coordinate Attention (Hou, Zhou, Feng, "Coordinate Attention for Efficient Mobile Network Design", CVPR 2021).

    Paper Eqs. 4-9. Average pooling along each spatial direction gives ``z^h_c(h) = 1/W Σ_i x_c(h, i)`` and
    ``z^w_c(w) = 1/H Σ_j x_c(j, w)``; both are concatenated along the spatial axis and sent through one shared 1×1
    conv ``F1`` (``C → M``), BatchNorm and h-swish: ``f = δ(BN(F1([z^h, z^w])))``. ``f`` is split back into ``f^h``,
    ``f^w``; two 1×1 convs ``F_h``, ``F_w`` (``M → C``) and sigmoids give the gates ``g^h = σ(F_h(f^h))`` and
    ``g^w = σ(F_w(f^w))``, and ``y_c(i, j) = x_c(i, j) · g^h_c(i) · g^w_c(j)``.

    Settled by the authors' code (the paper gives only "reduction ratio r" and a non-linearity ``δ``): hidden width
    ``M = max(8, C // r)``, ``δ`` = h-swish ``x · ReLU6(x + 3) / 6`` (``nn.Hardswish``), convs with bias. The two
    directional pools are means over one axis (``ReduceMean`` in ONNX, any input size), not adaptive pools, and the
    BatchNorm sees both directions together, as in the paper, so training statistics match it too. Without autograd
    (inference; not while tracing an export) ``x · g^w · g^h`` has its second multiply in place.

    YAML: ``[-1, 1, CoordAtt, []]`` or ``[-1, 1, CoordAtt, [r]]``.

    Args:
        c1 (int): input channels ``C``.
        r (int): reduction ratio, ``>= 1``. Default 32 (paper).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; gates ``self.gate_h`` ``(B, C, H, 1)`` and ``self.gate_w`` ``(B, C, 1, W)``.

    Raises:
        AttnBuildError: ``r`` not a positive int, or ``c1`` invalid.
    """

    def __init__(self, c1: int = C1, r: int = 32, init_values: float | None = None):
        super().__init__()
        c1, where, (r, init_values) = resolve(c1, "CoordAtt", r, init_values)
        check_r(r, where, paper=32)  # hidden = max(8, C // r): any r >= 1 fits
        check_init_values(init_values, where)
        self.c1, self.r, self.hidden = c1, r, max(8, c1 // r)
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
        y = x * gw  # without autograd the second multiply goes into y's own buffer (no second full-size tensor)
        return gated(x, y.mul_(gh) if in_place_ok() else y * gh, self.scale)
