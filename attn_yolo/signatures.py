"""The positional signatures of each block's most-copied public implementations, mapped onto ours: one table.

A public YAML row is written for the class its author copied, and Ultralytics passes the row's args to that class
positionally (after the input width, where the author's ``parse_model`` branch inserts it; verbatim otherwise). Each
``Signature`` records one such class: its call as published, where it comes from, and what each positional arg after
the input width is in terms of our block:

* ``hp(name, ours)``: one of our hyperparameters under another name (``reduction`` is our ``r``);
* ``ch(name)``: a channel count the class takes but that our block infers (``oup``, ``c2``, ``out_channels``): it
  must be one of the row's channel counts, and it is dropped;
* ``unused(name)``: an arg the class accepts and never uses (cv-attention's ``ShuffleAttention`` ignores its
  ``reduction``): dropped, and the log says so;
* ``fixed(name, ok, why)``: an option whose other values are a variant attn_yolo does not provide (``no_spatial``):
  a row setting another value is refused, naming the variant.

``attn_yolo.conventions`` reads a row by the signatures its args fit (ours first). ``PLAUSIBLE`` holds the range a
hyperparameter takes in its paper's experiments, which tells a channel count from a hyperparameter; ``DEFAULTS``
the defaults where the paper and the most-copied code differ. Sources were read from the repositories named; no
code is copied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from attn_yolo.nn.common import is_int, is_number


@dataclass(frozen=True)
class Slot:
    """One positional arg of a public signature (after the input width): see the module docstring."""

    kind: str  # "hp", "ch", "unused" or "fixed"
    name: str  # the arg's name in the source
    ours: str | None = None  # hp: our parameter
    default: object = None  # the source's default (used to write an edit in the source's form)
    ok: tuple = ()  # fixed: the values we provide
    why: str = ""  # fixed: what another value would build
    test: Callable | None = None  # unused, fixed: the values of the arg's kind (other values: not this signature)


def is_bool(v) -> bool:
    return isinstance(v, bool)


def is_names(v) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def positive_int(v) -> bool:
    return is_int(v) and v >= 1


def hp(name: str, ours: str, default=None) -> Slot:
    return Slot("hp", name, ours, default)


def ch(name: str, none_ok: bool = False) -> Slot:
    """A channel count the source takes (``none_ok``: its default is None, which a row may write)."""
    return Slot("ch", name, ok=(None,) if none_ok else ())


def unused(name: str, default, test: Callable) -> Slot:
    return Slot("unused", name, default=default, test=test)


def fixed(name: str, ok: tuple, why: str, test: Callable = is_bool) -> Slot:
    return Slot("fixed", name, default=ok[0], ok=ok, why=why, test=test)


@dataclass(frozen=True)
class Signature:
    """A public class a YAML row can be written for: its call as published, its source, its args after the width."""

    call: str
    source: str
    slots: tuple[Slot, ...]
    prefer: bool = False  # when it fits, it wins over other readings (a convention stronger than a guess)
    min_args: int = 0  # fewer args than this: not a row for this signature (they would set only unused args)


AVG_MAX = (["avg", "max"], ("avg", "max"))


def is_str(v) -> bool:
    return isinstance(v, str)


COORD_COPIES = "CoordAtt copies in YOLO collections"
LSKA_COPIES = "the LSKA copied beside SPPF_LSKA in YOLO collections"
SK_COPIES = "External-Attention-pytorch, cv-attention, yoloair"
BRA_LEGACY = "rayleizhu/BiFormer ops/bra_legacy.py, cv-attention"
QK_SCALE = fixed("qk_scale", (None,), "another softmax temperature than 1/sqrt(C), which attn_yolo does not provide",
                 lambda v: v is None or is_number(v))
AUTO_PAD = fixed("auto_pad", (False, True), "", is_bool)  # any map size here: padded to whole regions, pads masked

SIGNATURES: dict[str, list[Signature]] = {
    "SE": [
        # z1069614715/objectdetection_script cv-attention/SE.py, iscyy/yoloair models/Models/Attention/SEAttention.py:
        # Linear FCs without bias (ours: 1x1 convs with bias)
        Signature("SEAttention(channel=512, reduction=16)", "cv-attention, yoloair",
                  (hp("reduction", "r", 16),)),
    ],
    "ECA": [
        # BangguWu/ECANet models/eca_module.py: channel is accepted and unused; k_size fixed per stage (default 3)
        Signature("eca_layer(channel, k_size=3)", "BangguWu/ECANet", (hp("k_size", "k", 3),)),
        # cv-attention/ECA.py: no channel arg (its readme: need_channel False); its Conv1d has a bias (ours: none,
        # as the authors')
        Signature("ECAAttention(kernel_size=3)", "cv-attention",
                  (hp("kernel_size", "k", 3),)),
    ],
    "SAM": [
        # ultralytics/nn/modules/conv.py and External-Attention-pytorch model/attention/CBAM.py
        Signature("SpatialAttention(kernel_size=7)", "Ultralytics, External-Attention-pytorch",
                  (hp("kernel_size", "k", 7),)),
    ],
    "CBAM": [
        # ultralytics/nn/modules/conv.py: CBAM(c1, kernel_size=7); a lone 3 or 7 is its kernel
        Signature("CBAM(c1, kernel_size=7)", "Ultralytics", (hp("kernel_size", "k", 7),), prefer=True),
        # Jongchan/attention-module MODELS/cbam.py (the CBAM authors): spatial kernel fixed at 7
        Signature("CBAM(gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False)",
                  "Jongchan/attention-module", (
                      hp("reduction_ratio", "r", 16),
                      fixed("pool_types", AVG_MAX, "other pooled descriptors ('lp', 'lse'), which attn_yolo does "
                            "not provide", is_names),
                      fixed("no_spatial", (False,), "the channel gate alone, which attn_yolo does not provide as "
                            "CBAM (for a channel gate write SE or ECA)"),
                  )),
        # External-Attention-pytorch model/attention/CBAM.py (kernel_size=49; it also adds the input back,
        # out + x) and cv-attention/CBAM.py (kernel_size=7, no residual)
        Signature("CBAMBlock(channel=512, reduction=16, kernel_size=49)", "External-Attention-pytorch, cv-attention",
                  (hp("reduction", "r", 16), hp("kernel_size", "k", 49))),
    ],
    "CoordAtt": [
        # houqb/CoordAttention coordatt.py (the authors): an output width oup, equal to inp in every use
        Signature("CoordAtt(inp, oup, reduction=32)", "houqb/CoordAttention", (ch("oup"), hp("reduction", "r", 32))),
        # cv-attention/CoordAttention.py: the same without oup
        Signature("CoordAtt(inp, reduction=32)", "cv-attention", (hp("reduction", "r", 32),)),
        # copies in YOLO collections with the authors' signature, reduction=8 and a hidden floor other than 8
        # (mip = max(32, inp // reduction); 16 and 64 occur too) read as the authors' do; their defaults: DEFAULTS
    ],
    "EMA": [
        # YOLOonMe/EMA-attention-module EMA_attention_module (the authors): c2 accepted, unused
        Signature("EMA(channels, c2=None, factor=32)", "YOLOonMe/EMA-attention-module",
                  (ch("c2", none_ok=True), hp("factor", "factor", 32))),
        # cv-attention/EMA.py: default factor 8
        Signature("EMA(channels, factor=8)", "cv-attention", (hp("factor", "factor", 8),)),
    ],
    "SimAM": [
        # ZjjConan/SimAM simam_module (the authors) and External-Attention-pytorch SimAM.py: channels unused
        Signature("simam_module(channels=None, e_lambda=1e-4)", "ZjjConan/SimAM, External-Attention-pytorch",
                  (hp("e_lambda", "e_lambda", 1e-4),)),
        # cv-attention/SimAM.py: no channel arg (need_channel False: the row's args are passed verbatim)
        Signature("SimAM(e_lambda=1e-4)", "cv-attention", (hp("e_lambda", "e_lambda", 1e-4),)),
    ],
    "GAM": [
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
    ],
    "ShuffleAttention": [
        # wofmanaf/SA-Net models/sa_resnet.py (the authors)
        Signature("sa_layer(channel, groups=64)", "wofmanaf/SA-Net", (hp("groups", "groups", 64),)),
        # cv-attention/ShuffleAttention.py, iscyy/yoloair models/Models/Attention/ShuffleAttention.py: reduction
        # accepted and unused, G=8
        Signature("ShuffleAttention(channel=512, reduction=16, G=8)", "cv-attention, yoloair",
                  (unused("reduction", 16, positive_int), hp("G", "groups", 8))),
    ],
    "TripletAttention": [
        # landskape-ai/triplet-attention triplet_attention.py (the authors), External-Attention-pytorch,
        # cv-attention: kernel fixed at 7
        Signature("TripletAttention(no_spatial=False)", "landskape-ai/triplet-attention, External-Attention-pytorch",
                  (fixed("no_spatial", (False,), "the two-branch variant without the spatial gate, which attn_yolo "
                         "does not provide"),)),
        # landskape-ai/triplet-attention MODELS/triplet_attention.py (the authors' first version): CBAM's signature,
        # gate_channels, reduction_ratio and pool_types unused
        Signature("TripletAttention(gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False)",
                  "landskape-ai/triplet-attention MODELS/", (
                      unused("reduction_ratio", 16, positive_int), unused("pool_types", ["avg", "max"], is_names),
                      fixed("no_spatial", (False,), "the two-branch variant without the spatial gate, which "
                            "attn_yolo does not provide"),
                  )),
    ],
    "NAM": [
        # Christian-lyc/NAM MODELS/attention.py (the authors): Channel_Att(channels, t=16), t unused
        Signature("Channel_Att(channels, t=16)", "Christian-lyc/NAM", (unused("t", 16, positive_int),)),
        # iscyy/yoloair models/Models/Attention/NAMAttention.py: the channel gate only; out_channels and no_spatial
        # accepted and unused
        Signature("NAMAttention(channels, out_channels=None, no_spatial=True)", "yoloair",
                  (ch("out_channels", none_ok=True), unused("no_spatial", True, is_bool))),
    ],
    "LSKA": [
        # StevenLauHKHK/Large-Separable-Kernel-Attention (the authors) and cv-attention/LSKA.py: k_size=7
        Signature("LSKA(dim, k_size=7)", "StevenLauHKHK/Large-Separable-Kernel-Attention, cv-attention",
                  (hp("k_size", "k", 7),)),
        # the LSKA that YOLO collections copy beside SPPF_LSKA (which builds LSKA(c_ * 4, k_size=11)): k_size=11
        Signature("LSKA(dim, k_size=11)", LSKA_COPIES, (hp("k_size", "k", 11),)),
    ],
    "MLCA": [
        # wandahangFY/MLCA (the authors) and cv-attention/MLCA.py: our order and defaults
        Signature("MLCA(in_size, local_size=5, gamma=2, b=1, local_weight=0.5)", "wandahangFY/MLCA, cv-attention", (
            hp("local_size", "local_size", 5), hp("gamma", "gamma", 2), hp("b", "b", 1),
            hp("local_weight", "local_weight", 0.5),
        )),
    ],
    "ELA": [
        # cv-attention/ELA.py: no hyperparameters; a dense 1x1 Conv1d with bias and GroupNorm 16 (DEFAULTS)
        Signature("ELA(channels)", "cv-attention", ()),
    ],
    "CAA": [
        # NUST-Machine-Intelligence-Laboratory/PKINet (the authors) and cv-attention/CAA.py: our order and defaults
        Signature("CAA(ch, h_kernel_size=11, v_kernel_size=11)", "PKINet, cv-attention", (
            hp("h_kernel_size", "h_kernel_size", 11), hp("v_kernel_size", "v_kernel_size", 11),
        )),
    ],
    "SKAttention": [
        # xmu-xiaoma666/External-Attention-pytorch model/attention/SKAttention.py, cv-attention/SK.py, yoloair
        # SKAttention.py: dense k x k convs (with bias) of one group, Linear fuse/select layers; the same order as ours
        Signature("SKAttention(channel=512, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32)", SK_COPIES, (
            hp("kernels", "kernels", [1, 3, 5, 7]), hp("reduction", "r", 16), hp("group", "groups", 1),
            hp("L", "L", 32),
        )),
    ],
    "BiLevelRoutingAttention": [
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
    ],
    "MHSA": [
        # cv-attention/MHSA.py (BoTNet's MHSA): width/height size a relative position table used only with pos_emb
        Signature("MHSA(n_dims, width=14, height=14, heads=4, pos_emb=False)", "cv-attention (BoTNet's MHSA)", (
            unused("width", 14, positive_int), unused("height", 14, positive_int), hp("heads", "heads", 4),
            fixed("pos_emb", (False,), "BoTNet's relative position embeddings sized to one map, which attn_yolo "
                  "does not provide (its MHSA has a depthwise-conv position encoding for any map size)"),
        ), min_args=3),  # with fewer args a row sets only width/height, unused: nothing to read
    ],
}  # fmt: skip
"""Block name -> the public signatures a row can be written for (ours, from the constructor, is tried first)."""


def _int_in(lo: int, hi: int):
    return lambda v: is_int(v) and lo <= v <= hi


PLAUSIBLE: dict[tuple[str, str], tuple] = {
    ("SE", "r"): (_int_in(1, 32), "1..32 (Hu et al. tried 2 to 32)"),
    ("CBAM", "r"): (_int_in(1, 32), "1..32 (as SE)"),
    ("CoordAtt", "r"): (_int_in(1, 64), "1..64 (paper: 32)"),
    ("GAM", "rate"): (_int_in(1, 32), "1..32 (paper: 4)"),
    ("EMA", "factor"): (lambda v: v is None or _int_in(1, 64)(v), "1..64 groups (paper: 32)"),
    ("ShuffleAttention", "groups"): (lambda v: v is None or _int_in(1, 64)(v), "1..64 groups (paper: 64)"),
    ("ECA", "k"): (lambda v: v is None or _int_in(1, 9)(v), "1..9 (paper: adaptive, 3 to 9 in its tests)"),
    ("TripletAttention", "k"): (_int_in(1, 15), "1..15 (paper: 7)"),
    ("SimAM", "e_lambda"): (lambda v: is_number(v) and 0 < v <= 1, "(0, 1] (paper: 1e-4; searched 1e-6 to 1e-1)"),
    ("MHSA", "heads"): (_int_in(1, 64), "1..64 heads"),
}
"""``(block, hyperparameter) -> (test, range)``: the values a hyperparameter takes in its paper's experiments. A
reading that puts a value outside its range loses to one that does not (``attn_yolo.conventions``); alone, it is
still built."""


class _NotProvided:
    """A copy's default that builds a variant attn_yolo does not provide (``DEFAULTS``): said, never offered."""

    def __repr__(self) -> str:
        return "(not provided)"


UNPROVIDED = _NotProvided()

COORD_WHO = (f"CoordAtt(inp, oup, reduction=8) with mip = max(32, inp // reduction) ({COORD_COPIES}) uses "
             "reduction=8 and a hidden floor of 32")
SK_WHO = (f"SKAttention(channel=512, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32) ({SK_COPIES}) uses "
          "kernels [1, 3, 5, 7], one group and dense k x k convs")
BRA_WHO = (f"BiLevelRoutingAttention(dim, n_win=7, num_heads=8, ...) ({BRA_LEGACY}) and its NCHW version use "
           "num_heads=8 and side_dwconv=3")

DEFAULTS: dict[tuple[str, str], tuple[object, str, str]] = {
    ("ECA", "k"): (3, "eca_layer(channel, k_size=3) (BangguWu/ECANet) and ECAAttention(kernel_size=3) "
                      "(cv-attention) fix k=3", "k"),
    ("EMA", "factor"): (8, "EMA(channels, factor=8) (cv-attention) uses 8 groups", "groups"),
    ("ShuffleAttention", "groups"): (8, "ShuffleAttention(channel=512, reduction=16, G=8) (cv-attention, yoloair) "
                                        "uses 8 groups", "groups"),
    ("LSKA", "k"): (11, f"LSKA(dim, k_size=11) ({LSKA_COPIES}) uses k_size=11", "k"),
    ("CoordAtt", "r"): (8, COORD_WHO, "r"),
    ("CoordAtt", "min_hidden"): (32, COORD_WHO, "hidden"),
    ("SKAttention", "kernels"): ([1, 3, 5, 7], SK_WHO, "kernels"),
    ("SKAttention", "groups"): (1, SK_WHO, "groups"),
    ("SKAttention", "dilated"): (False, SK_WHO, "dilated"),
    ("ELA", "variant"): (UNPROVIDED, "ELA(channels) (cv-attention) is a dense 1x1 Conv1d with bias and GroupNorm 16",
                         "variant"),
    ("BiLevelRoutingAttention", "heads"): (8, BRA_WHO, "heads"),
    ("BiLevelRoutingAttention", "side_dwconv"): (3, BRA_WHO, "side_dwconv"),
}
"""``(block, hyperparameter) -> (value, who uses it, attribute)``: where the most-copied code's default differs from the
paper's. A row that leaves the hyperparameter out gets the paper's value and a log line with the edit for the other;
entries with the same ``who`` (one copy's defaults) share the line and the edit, and one whose value builds the same
block ``attribute`` at the row's width (CoordAtt's ``hidden`` at C=1024, BiFormer's 8 heads at C=256) is not said;
``UNPROVIDED``: the copy builds a variant attn_yolo does not provide (said, with no edit).
(External-Attention-pytorch's ``CBAMBlock`` defaults to ``kernel_size=49``, which is not a CBAM kernel here (3 or 7),
so it is not offered.)"""


def signatures(name: str) -> list[Signature]:
    """The public signatures of block ``name`` (empty for a block without any)."""
    return SIGNATURES.get(name, [])


def max_args(name: str, params: list[str]) -> int:
    """The most args a row for block ``name`` may have: a leading channel count and the longest signature."""
    return 1 + max([len(params), *(len(s.slots) for s in signatures(name))])
