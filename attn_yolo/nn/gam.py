"""Global Attention Mechanism (GAM): per-position channel MLP, then a two-conv spatial gate, without pooling."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check_c1, check_init_values, check_r
from attn_yolo.nn.declaration import Param, Signature, ch, declare, fixed, hp, int_in
from attn_yolo.nn.layer_scale import LayerScale, gated


@declare(
    "GAM",
    paper="Liu et al., Global Attention Mechanism: Retain Information to Enhance Channel-Spatial Interactions, 2021",
    params=(Param("rate", "an int in 1..C (hidden width C // rate >= 1)", (int_in(1, 32), "1..32 (paper: 4)")),),
    aliases=("GAM_Attention", "GAMAttention"),  # GAMAttention: yoloair's class name
    signatures=(
        # cv-attention/GAM.py
        Signature("GAM_Attention(in_channels, rate=4)", "cv-attention", (hp("rate", "rate", 4),)),
        # iscyy/yoloair models/Models/Attention/GAMAttention.py (an out width c2, and grouped 7x7 convs with a channel
        # shuffle by default); also copied as GAM_Attention(c1, c2, group=True, rate=4)
        Signature("GAMAttention(c1, c2, group=True, rate=4)", "yoloair", (
            ch("c2"),
            fixed("group", (False,), "the grouped-convolution variant with channel shuffle, which attn_yolo does "
                  "not provide"),
            hp("rate", "rate", 4),
        )),
    ),
    gate_maps={"channel": ("gain", "gate_c"), "spatial": ("after", "gate_c", "gate_s")},
    opset_ops="Conv (1×1 and 7×7, BatchNorm folded), Relu, Sigmoid, Mul",
    example_args=(4,),
)
class GAM(nn.Module):
    """Global Attention Mechanism (Liu, Shao, Hoffmann, arXiv 2112.05561, 2021).

    Paper: "Global Attention Mechanism: Retain Information to Enhance Channel-Spatial Interactions".

    As CBAM, channel then spatial attention, but neither pools: ``F2 = M_c(F1) ⊗ F1``, ``F3 = M_s(F2) ⊗ F2``.

    * ``M_c``: the map is permuted to ``(H, W, C)``, a two-layer MLP ``C → C/r → C`` (ReLU) runs on the channel
      vector of every position, the result is permuted back and passed through a sigmoid. An MLP applied per position
      is exactly a pair of 1×1 convolutions, which is how it runs here (no permutes at run time).
    * ``M_s``: ``σ(BN(Conv7×7(ReLU(BN(Conv7×7(F2))))))`` with widths ``C → C/r → C``.

    The authors published no code. Choices: the sigmoid on ``M_c`` as the paper's channel submodule figure draws it
    (a widely copied implementation multiplies by the raw MLP output instead, which is not a gate); BatchNorm after
    each 7×7 conv and ReLU between, as BAM, whose reduction scheme the paper follows; the 7×7 convs have no bias
    (BatchNorm follows each). Hidden width ``C // r`` (refused below 1, as ``SE``). No group convolution or channel
    shuffle (the paper's parameter-saving variant for ResNet-50): ``M_s`` costs ``2·49·C²/r`` MACs per position, the
    heaviest block here.

    YAML: ``[-1, 1, GAM, []]`` or ``[-1, 1, GAM, [rate]]``.

    Args:
        c1 (int): input channels ``C``.
        rate (int): reduction ratio ``r`` of both submodules, ``1 <= r <= C``. Default 4 (paper).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; gates ``self.gate_c`` and ``self.gate_s``, both ``(B, C, H, W)``.

    Raises:
        AttnBuildError: ``rate`` not an int in ``1..C``, ``init_values`` out of range, or ``c1`` invalid.
    """

    def __init__(self, c1: int, rate: int = 4, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "GAM")
        check_r(rate, where, c1, "rate", paper=4)
        check_init_values(init_values, where)
        self.c1, self.rate, self.hidden = c1, rate, c1 // rate
        c_ = self.hidden
        self.channel = nn.Sequential(nn.Conv2d(c1, c_, 1), nn.ReLU(inplace=True), nn.Conv2d(c_, c1, 1))
        self.gate_c = nn.Sigmoid()
        self.spatial = nn.Sequential(
            nn.Conv2d(c1, c_, 7, padding=3, bias=False),
            nn.BatchNorm2d(c_),
            nn.ReLU(inplace=True),
            nn.Conv2d(c_, c1, 7, padding=3, bias=False),
            nn.BatchNorm2d(c1),
        )
        self.gate_s = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.gate_c(self.channel(x))
        return gated(x, y * self.gate_s(self.spatial(y)), self.scale)
