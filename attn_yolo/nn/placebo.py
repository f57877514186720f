"""Placebo: the capacity control of an attention ablation (a residual pointwise MLP, no attention)."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_int
from attn_yolo.nn.declaration import Param, declare
from attn_yolo.nn.layer_scale import LayerScale, gated


@declare(
    "Placebo",
    params=(Param("hidden", "an int >= 1 (the MLP's hidden width; the ablation runner sets it to match a block's "
                  "parameters)"),),
    control=True,
)
class Placebo(nn.Module):
    """Residual pointwise MLP without attention, a placebo arm for an attention block (the control of
    ``attn-yolo ablate``'s ``placebo:``).

    ``y = x + W2 SiLU(W1 x)``: two bias-free 1×1 convolutions ``C→hidden→C`` at every pixel, 2·C·hidden weights. No
    pooling, no gate: it adds trainable capacity at the block's place, but nothing of what makes a block attention
    (context pooled over the image, an input-dependent multiplicative gate). The ablation runner sizes ``hidden`` per
    site so that the placebo has the attention block's parameter count (``round(P / 2C)``, within ``C`` weights), and
    inserts it where the block sits: a gain of the attention block that its placebo matches is extra capacity, not
    attention. (A block with its gate held constant would add no capacity at all: a constant channel scale folds
    into the next convolution.)

    YAML: ``[-1, 1, Placebo, [hidden]]`` or ``[-1, 1, Placebo, [hidden, 0.0]]``; ``C`` comes from the layer the row
    reads.

    Args:
        c1 (int): input channels ``C``.
        hidden (int): hidden width of the MLP, an int >= 1 (required).
        init_values (float | None): residual gate ``y = x + γ ⊙ W2 SiLU(W1 x)`` with ``γ`` initialised to this value
            in ``[0, 1]`` (0.0: identity at init, see ``LayerScale``), as the attention blocks take it; None: no gate.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``.

    Raises:
        AttnBuildError: ``hidden`` not an int >= 1, ``init_values`` out of range, or ``c1`` invalid.
    """

    def __init__(self, c1: int, hidden: int | None = None, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "Placebo")
        check(is_int(hidden) and hidden >= 1, where, "hidden", hidden,
              "an int >= 1 (the MLP's hidden width; the ablation runner sets it to match a block's parameters)")
        check_init_values(init_values, where)
        self.c1, self.hidden = c1, hidden
        self.fc1 = nn.Conv2d(c1, hidden, 1, bias=False)
        self.act = nn.SiLU()
        self.fc2 = nn.Conv2d(hidden, c1, 1, bias=False)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gated(x, x + self.fc2(self.act(self.fc1(x))), self.scale)


def placebo_hidden(params: int, c: int) -> int:
    """The hidden width that gives a ``Placebo`` on ``c`` channels closest to ``params`` weights (at least 1)."""
    return max(1, round(params / (2 * c)))
