"""SimAM: parameter-free 3-D attention from each neuron's minimal energy."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_number
from attn_yolo.nn.declaration import Param, Signature, declare, hp
from attn_yolo.nn.layer_scale import LayerScale, gated


def inverse_energy(x: torch.Tensor, e_lambda: float) -> torch.Tensor:
    """``1 / e*_t`` of every neuron ``t`` of ``x`` ``(B, C, H, W)``: SimAM's closed-form minimal energy, inverted.

    ``e*_t = 4(σ̂² + λ) / ((t − μ̂)² + 2σ̂² + 2λ)`` (Yang et al., ICML 2021), with ``μ̂ = 1/M Σ_i x_i`` and
    ``σ̂² = 1/M Σ_i (x_i − μ̂)²`` over the ``M = H·W`` neurons of ``t``'s channel, as the paper defines them. (The
    authors' code divides ``σ̂²`` by ``M − 1`` instead, a factor ``M / (M − 1)`` that the paper does not have: 1.0002
    on an 80×80 map, 4/3 on a 2×2 one; the paper's form also needs no special case for a 1×1 map.) Computed as
    ``1/e*_t = ((t − μ̂) / (2 √(σ̂² + λ)))² + 1/2``, a scale-free form in which large activations do not overflow
    fp16. Returns ``(B, C, H, W)``, every value >= 1/2.
    """
    d = x - x.mean((2, 3), keepdim=True)
    var = d.square().mean((2, 3), keepdim=True)
    return (d / (2 * (var + e_lambda).sqrt())).square() + 0.5


@declare(
    "SimAM",
    paper="Yang et al., SimAM: A Simple, Parameter-Free Attention Module for Convolutional Neural Networks, ICML 2021",
    params=(Param("e_lambda", "a number > 0", (lambda v: is_number(v) and 0 < v <= 1,
                  "(0, 1] (paper: 1e-4; searched 1e-6 to 1e-1)")),),
    aliases=("simam_module",),
    signatures=(
        # ZjjConan/SimAM simam_module (the authors) and External-Attention-pytorch SimAM.py: channels unused
        Signature("simam_module(channels=None, e_lambda=1e-4)", "ZjjConan/SimAM, External-Attention-pytorch",
                  (hp("e_lambda", "e_lambda", 1e-4),)),
        # cv-attention/SimAM.py: no channel arg (need_channel False: the row's args are passed verbatim)
        Signature("SimAM(e_lambda=1e-4)", "cv-attention", (hp("e_lambda", "e_lambda", 1e-4),)),
    ),
    gate_maps={"gain": ("gain", "gate")},
    opset_ops="ReduceMean, Sub, Mul, Div, Sqrt, Sigmoid",
)
class SimAM(nn.Module):
    """SimAM (Yang, Zhang, Li, Xie, "SimAM: A Simple, Parameter-Free Attention Module for CNNs", ICML 2021).

    Each neuron ``t`` gets the weight ``σ(1 / e*_t)``, its minimal energy ``e*_t`` in closed form (see
    ``inverse_energy``): a neuron that stands out from its channel (large ``(t − μ̂)²``) has low energy and a high
    weight. ``y = x ⊙ σ(1 / E)``. No parameters; ``λ`` is the energy's regulariser.

    YAML: ``[-1, 1, SimAM, []]`` or ``[-1, 1, SimAM, [e_lambda]]``.

    Args:
        c1 (int): input channels ``C`` (only used by the residual gate and for checking).
        e_lambda (float): ``λ > 0``, finite. Default 1e-4 (paper).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` outputs ``σ(1 / E)`` of shape ``(B, C, H, W)``.

    Raises:
        AttnBuildError: ``e_lambda`` not a finite number > 0 (inf, nan, 0, negative, bool), or ``c1`` invalid.
    """

    def __init__(self, c1: int, e_lambda: float = 1e-4, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "SimAM")
        check_init_values(init_values, where)
        check(is_number(e_lambda) and e_lambda > 0, where, "e_lambda", e_lambda, "a finite number > 0 (paper: 1e-4)")
        self.c1, self.e_lambda = c1, float(e_lambda)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gated(x, x * self.gate(inverse_energy(x, self.e_lambda)), self.scale)
