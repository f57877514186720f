"""Squeeze-and-Excitation (SE) channel attention."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check_c1, check_init_values, check_r
from attn_yolo.nn.declaration import Param, Signature, declare, hp, int_in
from attn_yolo.nn.layer_scale import LayerScale, gated


@declare(
    "SE",
    paper="Hu et al., Squeeze-and-Excitation Networks, CVPR 2018",
    params=(Param("r", "an int in 1..C (hidden width C // r >= 1)",
                  (int_in(1, 32), "1..32 (Hu et al. tried 2 to 32)")),),
    aliases=("SEAttention", "SELayer", "SEBlock", "SqueezeExcitation"),
    # z1069614715/objectdetection_script cv-attention/SE.py, iscyy/yoloair models/Models/Attention/SEAttention.py:
    # Linear FCs without bias (ours: 1x1 convs with bias)
    signatures=(Signature("SEAttention(channel=512, reduction=16)", "cv-attention, yoloair",
                          (hp("reduction", "r", 16),)),),
    gate_maps={"channel": ("gain", "gate")},
    opset_ops="ReduceMean (global pool), Conv, Relu, Sigmoid, Mul",
    example_args=(4,),
)
class SE(nn.Module):
    """Squeeze-and-Excitation block (Hu et al., "Squeeze-and-Excitation Networks", CVPR 2018).

    ``s = σ(W2 δ(W1 GAP(x)))``, ``y = x ⊙ s``: global average pool, FC ``C→C/r``, ReLU, FC ``C/r→C``, sigmoid,
    channel-wise scale. The FCs are 1×1 convolutions with bias. The hidden width is ``C // r``, as in the paper.

    YAML: ``[-1, 1, SE, []]`` or ``[-1, 1, SE, [r]]``; ``C`` comes from the layer the row reads (a leading channel
    count, ``[1024, 16]``, is read as such: ``attn_yolo.conventions``).

    Args:
        c1 (int): input channels ``C``.
        r (int): reduction ratio, ``1 <= r <= C`` (hidden width ``C // r >= 1``). Default 16 (paper).
        init_values (float | None): if set, a residual gate ``y = x + γ ⊙ (x ⊙ s − x)`` with ``γ`` initialised to this
            value in ``[0, 1]`` (0.0: identity at init, see ``LayerScale``). None (default): the paper's block.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; the gate ``self.gate`` outputs ``s`` of shape ``(B, C, 1, 1)`` in ``[0, 1]``.

    Raises:
        AttnBuildError: ``r`` not an int in ``1..C``, ``init_values`` out of range, or ``c1`` invalid.
    """

    def __init__(self, c1: int, r: int = 16, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "SE")
        check_r(r, where, c1)
        check_init_values(init_values, where)
        self.c1, self.r, self.hidden = c1, r, c1 // r
        self.fc1 = nn.Conv2d(c1, self.hidden, 1)
        self.act = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(self.hidden, c1, 1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gate(self.fc2(self.act(self.fc1(x.mean((2, 3), keepdim=True)))))
        return gated(x, x * s, self.scale)
