"""Selective Kernel attention (SKNet): parallel kernel branches fused by a softmax over branches per channel."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, group_count, is_int
from attn_yolo.nn.declaration import CopyDefault, Param, Signature, declare, hp
from attn_yolo.nn.layer_scale import LayerScale, gated

MAX_BRANCHES = 4
"""Most kernel branches accepted (the paper uses 2 and 3; External-Attention-pytorch's default has 4)."""
MAX_KERNEL = 11
"""Largest branch kernel accepted (the paper's largest is 7, as a 3×3 with dilation 3)."""


class SKBranches(nn.Module):
    """The ``M`` kernel branches of a selective-kernel block: ``[U_1, ..., U_M]``.

    Each branch is a grouped convolution (no bias), BatchNorm and ReLU, padded to keep the map size.

    Args:
        c (int): channels ``C`` (in and out).
        kernels (tuple[int, ...]): kernel size of each branch, odd, ascending.
        groups (int): convolution groups ``G``, a divisor of ``C``.
        dilated (bool): a kernel ``k >= 5`` is a 3×3 convolution with dilation ``(k − 1) / 2`` (the same receptive
            field; the paper's choice for efficiency). False: a dense ``k×k`` convolution.

    Shapes:
        ``(B, C, H, W) -> M × (B, C, H, W)`` (a list: never stacked into one tensor, which would cost a copy).
    """

    def __init__(self, c: int, kernels: tuple[int, ...], groups: int, dilated: bool = True):
        super().__init__()

        def branch(k: int) -> nn.Sequential:
            d = (k - 1) // 2 if dilated and k >= 5 else 1
            size = 3 if d > 1 else k
            conv = nn.Conv2d(c, c, size, padding=d * (size // 2), dilation=d, groups=groups, bias=False)
            return nn.Sequential(conv, nn.BatchNorm2d(c), nn.ReLU(inplace=True))

        self.convs = nn.ModuleList(branch(k) for k in kernels)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [seq(x) for seq in self.convs]


SK_COPIES = "External-Attention-pytorch, cv-attention, yoloair"
SK_WHO = (f"SKAttention(channel=512, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32) ({SK_COPIES}) uses "
          "kernels [1, 3, 5, 7], one group and dense k x k convs")


@declare(
    "SKAttention",
    paper="Li et al., Selective Kernel Networks, CVPR 2019",
    params=(
        Param("kernels", f"a list of 2..{MAX_BRANCHES} distinct odd ints in 1..{MAX_KERNEL}",
              copies=(CopyDefault([1, 3, 5, 7], SK_WHO, "kernels"),)),
        Param("r", "an int >= 1 (fuse width d = max(C // r, L))"),
        Param("groups", "None (adaptive) or a divisor of C", none_means="adaptive",
              copies=(CopyDefault(1, SK_WHO, "groups"),)),
        Param("L", "an int >= 1 (minimal fuse width)"),
        Param("dilated", "true or false", copies=(CopyDefault(False, SK_WHO, "dilated"),)),
    ),
    aliases=("SK", "SKNet", "SKConv"),
    alias_notes={"SKConv": "args are SKAttention's [kernels, r, groups, L, dilated], not SKConv's [M, G, r, stride, "
                 "L]: two branches are kernels=[3, 5]"},
    signatures=(
        # xmu-xiaoma666/External-Attention-pytorch model/attention/SKAttention.py, cv-attention/SK.py, yoloair
        # SKAttention.py: dense k x k convs (with bias) of one group, Linear fuse/select layers; the same order as ours
        Signature("SKAttention(channel=512, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32)", SK_COPIES, (
            hp("kernels", "kernels", [1, 3, 5, 7]), hp("reduction", "r", 16), hp("group", "groups", 1),
            hp("L", "L", 32),
        )),
    ),
    gate_maps={"large": ("large", "select")},
    opset_ops="grouped and dilated Conv, ReduceMean, Softmax over branches, ReduceSum",
    helpers=(SKBranches,),
)
class SKAttention(nn.Module):
    """Selective Kernel attention (Li, Wang, Hu, Yang, "Selective Kernel Networks", CVPR 2019).

    The SK convolution, Split, Fuse and Select (Eqs. 1-6):

    ::

        U_i = ReLU(BN(Conv_{k_i}(x)))                     # split: M branches, grouped convs (G groups)
        s = GAP(Σ_i U_i)                                  # fuse: (B, C)
        z = ReLU(BN(W_s s)),  d = max(C / r, L)           # (B, d)
        a_i = softmax_i(A_i z)                            # select: per channel, over the M branches
        V = Σ_i a_i ⊙ U_i

    ``W_s`` (``C→d``) and ``A_i`` (``d→C``) are bias-free 1×1 convolutions (the authors' Caffe models use no bias
    there either). The paper's SK unit has two branches, 3×3 and 5×5, the 5×5 "replaced with the dilated convolution
    with a 3×3 kernel and dilation size 2" for efficiency, G = 32, r = 16, L = 32: the defaults here. The block is the
    SK convolution alone, as the YOLO collections use ``SKAttention`` (no 1×1 convolutions around it, no residual:
    those belong to the SK unit of SKNet).

    Differences from public code, by choice:

    - External-Attention-pytorch's ``SKAttention(channel, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32)`` (the
      class YOLO YAMLs name) uses dense ``k×k`` kernels, one group, a ``Linear`` with bias and no BatchNorm/ReLU for
      ``W_s``, and ``Linear`` layers with bias for ``A_i``. Here the argument order is the same (so its rows read
      as written), but the defaults and the fuse/select layers are the paper's and the authors' (above); pass
      ``dilated=False`` and ``groups=1`` for its dense kernels.
    - ``groups`` left at None is the paper's 32 where 32 divides ``C``, else the largest divisor of ``C`` below 32
      (1 on a 3-channel map: a dense conv; ``C / G = 1``: depthwise).
    - Kernels are kept in ascending order (branch ``i`` has the ``i``-th smallest kernel; the order of a sum and a
      softmax over branches does not change the output).
    - ``BN`` after ``W_s`` normalises over the batch in training: train with batch >= 2 (as the paper's SKNet).

    YAML: ``[-1, 1, SKAttention, []]``, ``[-1, 1, SKAttention, [[3, 5, 7], 16]]`` (kernels, r).

    Args:
        c1 (int): channels ``C`` (in and out).
        kernels (list[int]): branch kernel sizes, 2 to 4 distinct odd ints in ``1..11``. Default ``[3, 5]`` (paper).
        r (int): reduction ratio, an int >= 1; fuse width ``d = max(C // r, L)`` (floored at ``L``). Default 16 (paper).
        groups (int | None): convolution groups ``G``, a divisor of ``C``; None (default): 32 adapted to ``C``.
        L (int): minimal fuse width ``d``, an int >= 1. Default 32 (paper).
        dilated (bool): kernels ``>= 5`` as dilated 3×3 convolutions (default True, paper); False: dense kernels.
        init_values (float | None): residual gate ``y = x + γ ⊙ (V − x)``, ``γ`` initialised to this value in
            ``[0, 1]`` (0.0: identity at init). None (default): the paper's block.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.branches`` outputs ``U_1 ... U_M`` ``(B, C, H, W)``, the selection
        ``self.select`` outputs ``a`` ``(B, M, C, 1, 1)`` (softmax over ``M``: ``Σ_i a_i = 1``).

    Raises:
        AttnBuildError: ``kernels``, ``r``, ``groups``, ``L``, ``dilated`` or ``init_values`` out of range, or ``c1``
            invalid.
    """

    def __init__(
        self,
        c1: int,
        kernels: list[int] | tuple[int, ...] = (3, 5),
        r: int = 16,
        groups: int | None = None,
        L: int = 32,  # noqa: N803 (the paper's symbol)
        dilated: bool = True,
        init_values: float | None = None,
    ):
        super().__init__()
        where = check_c1(c1, "SKAttention")
        ok = (
            isinstance(kernels, (list, tuple))
            and 2 <= len(kernels) <= MAX_BRANCHES
            and all(is_int(k) and 1 <= k <= MAX_KERNEL and k % 2 for k in kernels)
            and len(set(kernels)) == len(kernels)
        )
        allowed = f"a list of 2..{MAX_BRANCHES} distinct odd ints in 1..{MAX_KERNEL} (paper: [3, 5])"
        check(ok, where, "kernels", kernels, allowed)
        check(is_int(r) and r >= 1, where, "r", r, "an int >= 1 (fuse width d = max(C // r, L); paper: 16)")
        check(is_int(L) and L >= 1, where, "L", L, "an int >= 1 (minimal fuse width; paper: 32)")
        check(isinstance(dilated, bool), where, "dilated", dilated, "true or false (paper: true)")
        check_init_values(init_values, where)
        self.groups = group_count(groups, [g for g in range(1, c1 + 1) if c1 % g == 0], 32, where, "groups")
        self.c1, self.kernels, self.r, self.L, self.dilated = c1, tuple(sorted(kernels)), r, L, dilated
        self.d = max(c1 // r, L)
        self.branches = SKBranches(c1, self.kernels, self.groups, dilated)
        self.fuse = nn.Sequential(nn.Conv2d(c1, self.d, 1, bias=False), nn.BatchNorm2d(self.d), nn.ReLU(inplace=True))
        self.fc = nn.Conv2d(self.d, len(self.kernels) * c1, 1, bias=False)  # A_1 ... A_M stacked
        self.select = nn.Softmax(dim=1)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c = x.shape[:2]
        us = self.branches(x)  # M × (B, C, H, W)
        z = self.fuse(sum(u.mean((2, 3), keepdim=True) for u in us))  # from GAP(Σ_i U_i) = Σ_i GAP(U_i): (B, d, 1, 1)
        a = self.select(self.fc(z).view(b, len(us), c, 1, 1))  # (B, M, C, 1, 1)
        v = sum(a[:, i] * u for i, u in enumerate(us))  # V = Σ_i a_i ⊙ U_i
        return gated(x, v, self.scale)
