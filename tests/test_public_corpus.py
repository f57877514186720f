"""Rows written for the most-copied public implementations: each signature of ``attn_yolo.signatures``, its
differing defaults, a leading channel count for every block in every family and scale, and a corpus of rows from
public Ultralytics YAMLs, each read as its author meant (the meaning taken from the author's module code) or refused
with an edit. The fixtures describe the rows' styles and meanings; no file is copied."""

from __future__ import annotations

import ast
import functools
import re

import pytest
import torch
from conftest import truncated
from ultralytics.nn import tasks
from ultralytics.nn.tasks import yaml_model_load

import attn_yolo
from attn_yolo import AttnBuildError, UnknownModuleError
from attn_yolo.nn import (
    CAA,
    CBAM,
    ECA,
    ELA,
    EMA,
    GAM,
    LSKA,
    MHSA,
    MLCA,
    NAM,
    SAM,
    SE,
    CoordAtt,
    ShuffleAttention,
    SimAM,
    TripletAttention,
)
from attn_yolo.nn.biformer import BiLevelRoutingAttention
from attn_yolo.nn.eca import eca_kernel_size
from attn_yolo.nn.sk import SKAttention
from attn_yolo.nn.triplet import ZPoolGate
from attn_yolo.signatures import DEFAULTS, SIGNATURES, UNPROVIDED

BLOCKS = {c.__name__: c for c in (SE, ECA, SAM, CBAM, MHSA, CoordAtt, EMA, SimAM, GAM, ShuffleAttention,
                                   TripletAttention, NAM, LSKA, MLCA, ELA, CAA, SKAttention, BiLevelRoutingAttention)}
P5 = {"yolov8": 9, "yolo11": 10, "yolo26": 10}  # SPPF (yolov8) / C2PSA: 1024 channels as written
HEAD_P3 = {"yolov8": 15, "yolo11": 16}  # the head's P3 C2f / C3k2: 256 as written


def parse(d: dict):
    with torch.device("meta"):
        return tasks.parse_model(d, 3, verbose=False)[0]


def with_rows(family: str, scale: str, site: int, rows: list) -> dict:
    d = truncated(yaml_model_load(f"{family}{scale}.yaml"), site + 1)
    d["head" if d["head"] else "backbone"].extend(rows)
    return d


@functools.cache
def width(family: str, scale: str, site: int) -> int:
    """Output channels of layer ``site`` as Ultralytics alone builds it (plugin off), from a meta forward pass."""
    attn_yolo.unregister()
    try:
        seq = parse(truncated(yaml_model_load(f"{family}{scale}.yaml"), site + 1))
        y, x = [], torch.zeros(1, 3, 64, 64, device="meta")
        for m in seq:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x)
        return x.shape[1]
    finally:
        attn_yolo.register()


def build(family: str, scale: str, site: int, module: str, args: list, n: int = 1):
    m = parse(with_rows(family, scale, site, [[-1, n, module, args]]))[site + 1]
    return m[0] if isinstance(m, torch.nn.Sequential) else m


def hparams(m: torch.nn.Module) -> dict:
    """A block's hyperparameters as built (what tells two configurations apart)."""
    keys = ("r", "k", "groups", "rate", "heads", "head_dim", "e_lambda", "hidden", "attn_drop")
    out = {k: getattr(m, k) for k in keys if isinstance(getattr(m, k, None), (int, float))}
    if isinstance(m, CBAM):
        out["hidden"] = m.channel.hidden
    return out | {"gated": m.scale is not None}


def default(cls: type, c1: int, **kw) -> dict:
    """The hyperparameters of ``cls(c1, **kw)`` built directly (the independent reference)."""
    with torch.device("meta"):
        return hparams(cls(c1, **kw))


def resolve(v, c1: int):
    return {"C": 1024, "c1": c1}.get(v, v) if isinstance(v, str) else v


# (block, signature call, written module, args as the source's parse_model passes them after the width, meaning,
# whether the log names the signature: not where the row reads the same by our own signature and name).
# "C": the source layer's width as the YAML writes it (1024 at P5); meanings are our keyword arguments.
SIGNATURE_ROWS = [
    ("SE", "SEAttention(channel=512, reduction=16)", "SEAttention", ["C", 8], {"r": 8}, True),
    ("ECA", "eca_layer(channel, k_size=3)", "eca_layer", ["C", 5], {"k": 5}, True),
    ("ECA", "ECAAttention(kernel_size=3)", "ECAAttention", [3], {"k": 3}, True),
    ("SAM", "SpatialAttention(kernel_size=7)", "SpatialAttention", [3], {"k": 3}, True),
    ("CBAM", "CBAM(c1, kernel_size=7)", "CBAM", [3], {"k": 3}, True),
    ("CBAM", "CBAM(gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False)", "CBAM",
     [8, ["avg", "max"], False], {"r": 8}, True),
    ("CBAM", "CBAMBlock(channel=512, reduction=16, kernel_size=49)", "CBAMBlock", [8, 3], {"r": 8, "k": 3}, True),
    ("CoordAtt", "CoordAtt(inp, oup, reduction=32)", "CoordAtt", ["C", "C", 16], {"r": 16}, True),
    ("CoordAtt", "CoordAtt(inp, reduction=32)", "CoordAttention", [16], {"r": 16}, False),
    ("EMA", "EMA(channels, c2=None, factor=32)", "EMA", ["C", "C", 16], {"factor": 16}, True),
    ("EMA", "EMA(channels, factor=8)", "EMAttention", [8], {"factor": 8}, False),
    ("SimAM", "simam_module(channels=None, e_lambda=1e-4)", "simam_module", ["C", 1e-3], {"e_lambda": 1e-3}, True),
    ("SimAM", "SimAM(e_lambda=1e-4)", "SimAM", [1024], {}, False),  # passed verbatim there: 1024 is a count
    ("GAM", "GAM_Attention(in_channels, rate=4)", "GAM_Attention", [8], {"rate": 8}, True),
    ("GAM", "GAMAttention(c1, c2, group=True, rate=4)", "GAMAttention", ["C", False, 8], {"rate": 8}, True),
    ("ShuffleAttention", "sa_layer(channel, groups=64)", "sa_layer", [16], {"groups": 16}, True),
    ("ShuffleAttention", "ShuffleAttention(channel=512, reduction=16, G=8)", "ShuffleAttention", [16, 4],
     {"groups": 4}, True),
    ("TripletAttention", "TripletAttention(no_spatial=False)", "TripletAttention", [False], {}, True),
    ("TripletAttention",
     "TripletAttention(gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False)",
     "TripletAttention", [16, ["avg", "max"], False], {}, True),
    ("NAM", "Channel_Att(channels, t=16)", "NAM", ["C", 16], {}, True),  # verbatim: Channel_Att(C, 16)
    ("NAM", "NAMAttention(channels, out_channels=None, no_spatial=True)", "NAMAttention", ["C", None, True], {}, True),
    ("MHSA", "MHSA(n_dims, width=14, height=14, heads=4, pos_emb=False)", "MHSA", [14, 14, 8], {"heads": 8}, True),
    ("MLCA", "MLCA(in_size, local_size=5, gamma=2, b=1, local_weight=0.5)", "MLCA", ["C", 3, 2, 1, 0.25],
     {"local_size": 3, "local_weight": 0.25}, False),  # our order: read as ours
    ("ELA", "ELA(channels)", "ELA", ["C"], {}, False),  # no hyperparameters: our defaults (and a note on its variant)
    ("CAA", "CAA(ch, h_kernel_size=11, v_kernel_size=11)", "CAA", ["C", 7, 7],
     {"h_kernel_size": 7, "v_kernel_size": 7}, False),
    ("LSKA", "LSKA(dim, k_size=7)", "LSKA", ["C", 23], {"k": 23}, False),  # our order: read as ours
    ("LSKA", "LSKA(dim, k_size=11)", "LargeSeparableKernelAttention", ["C", 11], {"k": 11}, False),
    ("SKAttention", "SKAttention(channel=512, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32)", "SKAttention",
     ["C", [1, 3, 5, 7], 8, 1, 16], {"kernels": [1, 3, 5, 7], "r": 8, "groups": 1, "L": 16}, False),
    ("BiLevelRoutingAttention", "BiLevelRoutingAttention_nchw(dim, num_heads=8, n_win=7, qk_scale=None, topk=4, "
     "side_dwconv=3, auto_pad=False, attn_backend='torch')", "BiLevelRoutingAttention_nchw", [4, 5, None, 2, 3],
     {"heads": 4, "n_win": 5, "topk": 2, "side_dwconv": 3}, True),
    ("BiLevelRoutingAttention", "BiLevelRoutingAttention(dim, n_win=7, num_heads=8, qk_dim=None, qk_scale=None, ..., "
     "topk=4, ..., side_dwconv=3, auto_pad=False)", "BiLevelRoutingAttention", [7, 4], {"n_win": 7, "heads": 4}, True),
]


def test_every_signature_has_a_row():
    """The table and the rows below cannot drift apart."""
    table = {(b, s.call) for b, sigs in SIGNATURES.items() for s in sigs}
    assert table == {(r[0], r[1]) for r in SIGNATURE_ROWS}


@pytest.mark.parametrize("scale", ["n", "x"])
@pytest.mark.parametrize("block, call, written, args, meaning, named", SIGNATURE_ROWS,
                         ids=[f"{r[2]}{r[3]}".replace(" ", "") for r in SIGNATURE_ROWS])
def test_row_for_a_public_signature_builds_as_that_signature_means(scale, block, call, written, args, meaning, named,
                                                                   log):
    c1 = width("yolo11", scale, 10)
    m = build("yolo11", scale, 10, written, [resolve(a, c1) for a in args])
    assert type(m) is BLOCKS[block] and m.c1 == c1
    assert hparams(m) == default(BLOCKS[block], c1, **meaning)
    assert len(log) == 1 and log[0].startswith(f"attn-yolo: row 11 (scale {scale}) {written}")
    assert f"read as {block}(c1={c1}" in log[0]
    assert (f"by the signature {call} (" in log[0]) if named else ("by the signature" not in log[0])
    for slot_name in re.findall(r"(\w+) is its (\w+), which it never uses", log[0]):
        assert slot_name[1] in call  # an unused arg is named by the source's name


# Rows that set an option whose other values are a variant attn_yolo does not provide: refused, naming it, with
# the edit for our block (which must then build).
VARIANT_ROWS = [
    ("TripletAttention", [True], "the two-branch variant without the spatial gate", []),
    ("CBAM", [16, ["avg", "max"], True], "the channel gate alone", [16]),
    ("CBAM", [16, ["avg", "lse"], False], "other pooled descriptors", [16]),
    ("GAMAttention", ["C", True, 4], "the grouped-convolution variant", [4]),
    ("MHSA", [14, 14, 4, True], "BoTNet's relative position embeddings", [4]),
]


@pytest.mark.parametrize("written, args, variant, edit", VARIANT_ROWS, ids=[f"{r[0]}{r[1]}" for r in VARIANT_ROWS])
def test_variant_not_provided_refused_with_edit(written, args, variant, edit):
    with pytest.raises(AttnBuildError) as e:
        build("yolo11", "n", 10, written, [resolve(a, 256) for a in args])
    msg = str(e.value)
    assert msg.startswith(f"row 11 (scale n) {written}") and variant in msg and "does not provide" in msg
    assert f"write {edit!s}".replace("'", "") in msg.replace("'", "")
    build("yolo11", "n", 10, written, edit)  # the edit builds


@pytest.mark.parametrize("written, args, source", [
    ("ShuffleAttention", [5], "ShuffleAttention(channel=512, reduction=16, G=8)"),  # groups 5 (a typo), or unused
    ("NAM", [16], "Channel_Att(channels, t=16)"),
    ("TripletAttention", [6], "TripletAttention(gate_channels, reduction_ratio=16"),
])
def test_row_of_unused_args_only_is_refused_with_both_readings(written, args, source):
    """A row whose args only one signature takes, and never uses: a typo of ours or a copied row, indistinguishable;
    refused with our error and the edit that drops them (which builds)."""
    with pytest.raises(AttnBuildError) as e:
        build("yolo11", "n", 10, written, args)
    msg = str(e.value)
    assert msg.startswith(f"row 11 (scale n) {written}: ") and " is invalid" in msg
    assert f"For {source}" in msg and "would be unused args: write [] for that" in msg
    build("yolo11", "n", 10, written, [])


# Our documented value of each DEFAULTS attribute at width c, and what the copy's values build where that is not the
# value itself (written from the docstrings and the copies' code, independent of the code under test).
DOCUMENTED = {
    ("ECA", "k"): eca_kernel_size, ("EMA", "factor"): lambda c: 32, ("ShuffleAttention", "groups"): lambda c: 64,
    ("LSKA", "k"): lambda c: 7, ("CoordAtt", "r"): lambda c: 32, ("CoordAtt", "min_hidden"): lambda c: max(8, c // 32),
    ("SKAttention", "kernels"): lambda c: (3, 5), ("SKAttention", "groups"): lambda c: 32,
    ("SKAttention", "dilated"): lambda c: True, ("BiLevelRoutingAttention", "heads"): lambda c: c // 32,
    ("BiLevelRoutingAttention", "side_dwconv"): lambda c: 5, ("ELA", "variant"): lambda c: "B",
}  # fmt: skip
COPY_BUILDS = {("CoordAtt", "min_hidden"): lambda c: max(32, c // 8),
               ("SKAttention", "kernels"): lambda c: (1, 3, 5, 7)}


def left_out(line: str) -> list[str]:
    """The hyperparameters a log line says the row left out (``r, min_hidden left out: ...``)."""
    m = re.search(r"(\w+(?:, \w+)*) left out: the paper's", line)
    return m.group(1).split(", ") if m else []


@pytest.mark.parametrize("block, param", list(DEFAULTS), ids=[f"{b}.{p}" for b, p in DEFAULTS])
@pytest.mark.parametrize("scale", ["n", "x"])
def test_default_that_differs_gets_the_papers_value_and_logs_the_edit_for_the_other(block, param, scale, log):
    value, who, attr = DEFAULTS[(block, param)]
    c1 = width("yolo11", scale, 10)
    m = build("yolo11", scale, 10, block, [])
    ours, theirs = DOCUMENTED[(block, param)](c1), COPY_BUILDS.get((block, param), lambda c: value)(c1)
    assert getattr(m, attr) == ours
    mine = [line for line in log if line.startswith("attn-yolo: ")]
    assert len(mine) <= 1
    if value is UNPROVIDED:  # the copy is a variant attn_yolo does not build: said, no edit offered
        assert len(mine) == 1 and param in left_out(mine[0]) and f"{who}, which attn_yolo does not provide" in mine[0]
        assert "write [" not in mine[0]
        return
    if ours == theirs:  # the copy's value builds the same block at this width: nothing to say about it
        assert not mine or param not in left_out(mine[0])
        return
    assert len(mine) == 1 and param in left_out(mine[0]) and who in mine[0]
    edit = re.search(r"write (\[.*\]) for that", mine[0]).group(1)
    log.clear()
    other = build("yolo11", scale, 10, block, ast.literal_eval(edit))  # the printed edit, as a YAML would hold it
    assert getattr(other, attr) == theirs
    assert not [line for line in log if "left out" in line]  # given explicitly: no default to report


# Rows as the authors of two copies write them, whose class defaults differ from ours: read with the paper's values
# and announced with the edit that builds the author's block (which the test builds). (module, args, site, what the
# author's class builds at width c: attribute -> value). "C": the source's width as the YAML writes it.
CA_COPY = {"r": lambda c: 8, "hidden": lambda c: max(32, c // 8)}
SK_DENSE = {"kernels": lambda c: (1, 3, 5, 7), "groups": lambda c: 1, "dilated": lambda c: False, "r": lambda c: 16}
COPY_AUTHOR_ROWS = [
    # CoordAtt copies in YOLO collections: CoordAtt(inp, oup, reduction=8), mip = max(32, inp // reduction); their
    # parse_model branch passes [inp, oup]: rows write oup, or inp and oup where the args go verbatim
    ("CoordAtt", ["C"], "p5", CA_COPY),
    ("CoordAtt", ["C", "C"], "p5", CA_COPY),
    ("CA", ["C"], "head_p3", CA_COPY),
    # External-Attention-pytorch: SKAttention(channel=512, kernels=[1, 3, 5, 7], reduction=16, group=1, L=32), dense
    # k x k convs of one group; rows write the channel only, every argument, or none
    ("SKAttention", ["C"], "p5", SK_DENSE),
    ("SKAttention", ["C", [1, 3, 5, 7], 16, 1, 32], "p5", SK_DENSE),
    ("SKAttention", [], "head_p3", SK_DENSE),
]


@pytest.mark.parametrize("scale", ["n", "x"])
@pytest.mark.parametrize("module, args, site, theirs", COPY_AUTHOR_ROWS,
                         ids=[f"{r[0]}{r[1]}@{r[2]}".replace(" ", "") for r in COPY_AUTHOR_ROWS])
def test_row_written_for_a_copy_is_announced_with_the_edit_that_builds_the_authors_block(module, args, site, theirs,
                                                                                       scale, log):
    """Never read silently another way: the line names the copy and the edit, and the edit builds the author's
    block at this width (not the paper's, which the row gets)."""
    family = "yolov8"
    at = {"p5": P5[family], "head_p3": HEAD_P3[family]}[site]
    c1 = width(family, scale, at)
    written = {"p5": 1024, "head_p3": 256}[site]  # the source's width as the YAML writes it
    m = build(family, scale, at, module, [written if a == "C" else a for a in args])
    mine = [line for line in log if line.startswith("attn-yolo: ")]
    assert len(mine) == 1 and "left out: the paper's" in mine[0], mine
    edit = ast.literal_eval(re.search(r"write (\[.*\]) for that", mine[0]).group(1))
    other = build(family, scale, at, module, edit)
    assert {k: getattr(other, k) for k in theirs} == {k: f(c1) for k, f in theirs.items()}
    assert {k: getattr(m, k) for k in theirs} != {k: f(c1) for k, f in theirs.items()}  # ours: the paper's


@pytest.mark.parametrize("family", ["yolov8", "yolo11", "yolo26"])
@pytest.mark.parametrize("scale", ["n", "s", "m", "l", "x"])
def test_leading_channel_count_recognised_for_every_block(family, scale, log):
    """Every block after P5, once with the width as the YAML writes it (1024) and once as built at this scale: the
    number is read as the channel count, the block gets its defaults. One YAML per family and scale."""
    site, c1 = P5[family], width(family, scale, P5[family])
    rows = [[-1, 1, name, [count]] for count in (1024, c1) for name in BLOCKS]
    seq = parse(with_rows(family, scale, site, rows))
    for i, (_, _, name, (count,)) in enumerate(rows, site + 1):
        m = seq[i]
        assert type(m) is BLOCKS[name] and m.c1 == c1, (name, count)
        assert hparams(m) == default(BLOCKS[name], c1), (name, count)
    assert len(log) == len(rows)
    for line, (_, _, name, (count,)) in zip(log, rows):
        assert f" {name}, [{count}] read as {name}(c1={c1}" in line and f"{count} is the channel count" in line


# ------------------------------------------------------------------------------------------------ public corpus
# One row style per entry, with the meaning its author's module code (and parse_model branch, where stored) gives
# it. (repository, file, family, scale, site, repeats, module, args, meaning). Meaning: (block, kwargs) built with
# those hyperparameters; "default:<param>" a hyperparameter left to its default, whose log line must offer the
# other collection's value; ("unknown", name) a block attn_yolo does not provide (refused, naming it).
CORPUS = [
    ("kendyle2702/ultralytics_optimized", "ultralytics/cfg/models/v8/yolov8-EMA.yaml", "yolov8", "n", 9, 1,
     "EMA", [8], ("EMA", {"factor": 8})),  # its comment: factor=8 so that every scale divides
    ("kendyle2702/ultralytics_optimized", "ultralytics/cfg/models/v8/yolov8-GAM.yaml", "yolov8", "n", 9, 1,
     "GAM", [4], ("GAM", {"rate": 4})),
    ("kendyle2702/ultralytics_optimized", "ultralytics/cfg/models/v8/yolov8-CA.yaml", "yolov8", "n", 9, 1,
     "CA", [32], ("CoordAtt", {"r": 32})),
    ("kendyle2702/ultralytics_optimized", "ultralytics/cfg/models/v8/yolov8-SimAM.yaml", "yolov8", "n", 9, 1,
     "SimAM", [1e-4], ("SimAM", {"e_lambda": 1e-4})),
    ("IamSunday/Enhanced-YOLOv8-for-Detecting-Multiple-Defects-on-Bridge-Surfaces",
     "ultralytics/cfg/models/v8/yolov8-GAM.yaml", "yolov8", "m", 15, 1, "GAM", [], ("GAM", {})),
    ("IamSunday/Enhanced-YOLOv8-for-Detecting-Multiple-Defects-on-Bridge-Surfaces",
     "ultralytics/cfg/models/v8/yolov8-CA.yaml", "yolov8", "m", 15, 1, "CoordAtt", [], ("CoordAtt", {})),
    ("Nidhogg3/YOLOv8_SEAttention", "ultralytics/cfg/models/v8/yolov8-EMA.yaml", "yolov8", "n", 15, 1,
     "EMA", [8], ("EMA", {"factor": 8})),
    ("Nidhogg3/YOLOv8_SEAttention", "ultralytics/cfg/models/v8/yolov8-GAM.yaml", "yolov8", "n", 9, 1,
     "GAM_Attention", [1024], ("GAM", {})),  # 1024: SPPF's width as written
    ("SunwayDevelopers/unattended-baggage-yolov8-modification",
     "ultralytics/cfg/models/v8/yolov8-ShuffleAttention.yaml", "yolov8", "n", 15, 1,
     "ShuffleAttention", [256], ("ShuffleAttention", "default:groups")),  # 256: the C2f's width as written
    ("SyWhs/ultralytics", "ultralytics/cfg/models/v8/yolov8-TripletAttention.yaml", "yolov8", "n", 8, 1,
     "TripletAttention", [], ("TripletAttention", {})),
    ("Zhao1277570389/DLW-YOLO", "ultralytics/cfg/models/v8/yolov8-NAM.yaml", "yolov8", "n", 21, 1,
     "NAM", [256], ("NAM", {})),  # 256: the P5 C2f's width at scale n (the file's first scale)
    ("Zhao1277570389/DLW-YOLO", "ultralytics/cfg/models/v8/yolov8-SimAM.yaml", "yolov8", "n", 21, 1,
     "SimAM", [256], ("SimAM", {})),
    ("JcTangka/ultralytics-main", "ultralytics/cfg/models/v8/yolov8-MHSA.yaml", "yolov8", "n", 9, 1,
     "MHSA", [1024], ("MHSA", {"heads": 4})),  # BoTNet MHSA(n_dims, width, height, heads=4, pos_emb=False)
    ("QiujiHan/EEML-YOLO", "ultralytics/cfg/models/11/yolo11-EMA.yaml", "yolo11", "n", 9, 2,
     "EMA", [1024], ("EMA", "default:factor")),  # 1024: SPPF's width as written
    ("beiweidedagongren/pedestrian-detection", "ultralytics/cfg/models/v8/yolov8-EMA.yaml", "yolov8", "s", 15, 3,
     "EMA_attention", [256], ("EMA", "default:factor")),  # EMA_attention(channels, c2=None, factor=32)
    ("nithoukhan1/ResEMA", "ultralytics/cfg/models/11/yolo11-EMA.yaml", "yolo11", "s", 13, 1,
     "ResEMA", [8], ("unknown", "ResEMA")),  # its own residual EMA: not an attn_yolo block
    ("syz247179876/CV-Tree", "ultralytics/cfg/models/v8/yolov8-CA.yaml", "yolov8", "n", 4, 1,
     "CABlock", [32], ("unknown", "CABlock")),  # its own block name
]


def test_corpus_spans_enough_yamls_and_repositories():
    assert len({(r[0], r[1]) for r in CORPUS}) >= 15 and len({r[0] for r in CORPUS}) >= 8
    assert len({r[8][0] for r in CORPUS} - {"SE", "CBAM", "ECA", "unknown"}) >= 7  # families beyond SE/CBAM/ECA


@pytest.mark.parametrize("scale_of", ["file", "n"])
@pytest.mark.parametrize("repo, path, family, scale, site, n, module, args, meaning", CORPUS,
                         ids=[f"{r[0].split('/')[0]}:{r[6]}{r[7]}" for r in CORPUS])
def test_public_row_read_as_its_author_meant(repo, path, family, scale, site, n, module, args, meaning, scale_of,
                                             log):
    """Each row at the scale its file uses and at n: the block its author's code builds, or a clear refusal."""
    scale = scale if scale_of == "file" else "n"
    block, want = meaning
    if block == "unknown":
        with pytest.raises(UnknownModuleError, match=f"'{want}'"):
            build(family, scale, site, module, args, n)
        return
    c1 = width(family, scale, site)
    m = build(family, scale, site, module, args, n)
    assert type(m) is BLOCKS[block] and m.c1 == c1
    if isinstance(want, dict):
        assert hparams(m) == default(BLOCKS[block], c1, **want)
    else:  # left to the default: the paper's value, and a log line with the edit for the other collection's
        param = want.split(":")[1]
        assert hparams(m) == default(BLOCKS[block], c1)
        assert [line for line in log if f"{param} left out" in line and "write [" in line]


def test_docstring_claims_about_the_authors_code():
    """Triplet's BatchNorm momentum is the authors' 0.01 (its running mean moves 1 % of the way per batch); CBAM's
    spatial gate has no BatchNorm (the paper's Eq. 3; the authors' code has one)."""
    gate = ZPoolGate(7).train()
    z = torch.randn(4, 2, 5, 5) + 3.0
    gate(z)
    conv_out = gate.conv(z)
    torch.testing.assert_close(gate.bn.running_mean, 0.01 * conv_out.mean((0, 2, 3)).detach())
    assert not [m for m in CBAM(32).spatial.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]


def test_two_signatures_that_fit_differently_are_refused_with_an_edit_for_each():
    """CoordAtt [128, 64] after yolov8's P2 C2f (128 as written; 64 its width at scale s): ours reads 64 as r after
    the channel count, the authors' CoordAtt(inp, oup, reduction) reads it as oup. Each printed edit builds as its
    reading, unambiguously."""
    with pytest.raises(AttnBuildError) as e:
        build("yolov8", "n", 2, "CoordAtt", [128, 64])
    msg = str(e.value)
    assert "is ambiguous" in msg and "houqb/CoordAttention" in msg and "attn_yolo's CoordAtt" in msg
    edits = {what: ast.literal_eval(edit) for edit, what in re.findall(r"(\[[^\]]*\]) for (r=64|the defaults)", msg)}
    assert build("yolov8", "n", 2, "CoordAtt", edits["r=64"]).r == 64
    assert build("yolov8", "n", 2, "CoordAtt", edits["the defaults"]).r == 32
