"""Rows written for the popular copies of LSKA, BiLevelRoutingAttention, SKAttention and CoordAtt, whose class defaults
differ from ours: a row that leaves the hyperparameter out gets our documented value and one log line that names the
copy's value and the edit; the edit builds the copy's value. Also the generated table of every block's copies
(``docs/copies.md``). The rows' styles and the copies' defaults come from reading the copies' code; none is copied."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch
from conftest import truncated
from ultralytics.nn import tasks
from ultralytics.nn.tasks import yaml_model_load

from attn_yolo import AttnBuildError
from attn_yolo.copies import copies_markdown
from attn_yolo.registry import MODULES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "copies.md"


def build(scale: str, site: int, module: str, args: list):
    """The block of a row ``[-1, 1, module, args]`` after layer ``site`` of yolo11 at ``scale`` (meta device)."""
    d = truncated(yaml_model_load(f"yolo11{scale}.yaml"), site + 1)
    d["head" if d["head"] else "backbone"].append([-1, 1, module, args])
    with torch.device("meta"):
        return tasks.parse_model(d, 3, verbose=False)[0][site + 1]


def one_line(log: list[str]) -> str:
    mine = [line for line in log if line.startswith("attn-yolo: ")]
    assert len(mine) == 1, mine
    return mine[0]


def edit_of(line: str) -> list:
    """The edit a log line offers (``write [...] for that``), as a YAML would hold it."""
    return ast.literal_eval(re.search(r"write (\[.*\]) for that", line).group(1))


def test_lska_row_of_the_sppf_lska_copy_gets_k7_and_the_edit_for_k11(log):
    """``LSKA, [1024]`` (channel count first, k left out) as written for the LSKA copied beside SPPF_LSKA, whose
    ``k_size`` defaults to 11: built with our k = 7; the line names 11 and ``[11]``, which builds k = 11."""
    m = build("n", 10, "LSKA", [1024])
    assert (m.c1, m.k) == (256, 7) and m.conv_spatial_h.kernel_size == (1, 3)  # (3, 3, 2): 7x7 receptive field
    line = one_line(log)
    assert "1024 is the channel count" in line and "k left out: the paper's k=7" in line
    assert "LSKA(dim, k_size=11)" in line and "uses k_size=11" in line and edit_of(line) == [11]
    log.clear()
    other = build("n", 10, "LSKA", edit_of(line))
    assert other.k == 11 and other.conv_spatial_h.kernel_size == (1, 5)  # (3, 5, 2)
    assert not log


def test_bra_row_of_the_legacy_copy_gets_head_width_32_and_lce_5_and_the_edit_for_its_defaults(log):
    """``BiLevelRoutingAttention, [7]`` written for BiFormer's legacy module as cv-attention copies it,
    ``(dim, n_win=7, num_heads=8, ..., side_dwconv=3)``: 7 is n_win (as our heads it would not divide C=128), and
    heads / side_dwconv are left out: our C/32 = 4 heads and a 5x5 LCE; the line gives [8, 7, 4, 3]."""
    m = build("n", 4, "BiLevelRoutingAttention", [7])  # yolo11n P3: 128 channels
    assert (m.c1, m.n_win, m.heads, m.side_dwconv, m.lepe.kernel_size) == (128, 7, 4, 5, (5, 5))
    line = one_line(log)
    assert "by the signature BiLevelRoutingAttention(dim, n_win=7, num_heads=8" in line
    assert "heads, side_dwconv left out: the paper's C/32 heads, 4 at C=128 and side_dwconv=5" in line
    assert "use num_heads=8 and side_dwconv=3" in line and edit_of(line) == [8, 7, 4, 3]
    log.clear()
    other = build("n", 4, "BiLevelRoutingAttention", edit_of(line))
    assert (other.heads, other.n_win, other.side_dwconv, other.lepe.kernel_size) == (8, 7, 3, (3, 3))
    assert not log  # our own order, everything given: read as written


def test_bra_row_that_the_two_orders_read_differently_is_refused_with_an_edit_for_each():
    """``[8]``: 8 heads in our (and bra_nchw's) order, n_win = 8 in the legacy module's: refused; each edit builds its
    reading, unambiguously."""
    with pytest.raises(AttnBuildError) as e:
        build("n", 10, "BiLevelRoutingAttention", [8])
    msg = str(e.value)
    assert msg.startswith("row 11 (scale n) BiLevelRoutingAttention: args=[8] is ambiguous") and "bra_legacy" in msg
    edits = dict((what, ast.literal_eval(edit)) for edit, what in re.findall(r"(\[[^\]]*\]) for (\w+=\d+)", msg))
    assert set(edits) == {"heads=8", "n_win=8"}
    a, b = build("n", 10, "BiLevelRoutingAttention", edits["heads=8"]), build("n", 10, "BRA", edits["n_win=8"])
    assert (a.heads, a.n_win) == (8, 7) and (b.heads, b.n_win) == (8, 8)  # C=256: C/32 = 8 heads as well


def test_sk_row_of_the_external_attention_copy_gets_the_papers_convs_and_the_edit_for_dense_ones(log):
    """``SKAttention, [1024, [1, 3, 5, 7], 16]`` in External-Attention-pytorch's order (channel, kernels, reduction),
    group and L left out: the paper's 32 groups and a dilated 3x3 for k >= 5; the line's edit builds its dense convs
    of one group."""
    m = build("n", 10, "SKAttention", [1024, [1, 3, 5, 7], 16])
    convs = [seq[0] for seq in m.branches.convs]
    assert m.kernels == (1, 3, 5, 7) and m.groups == 32 and m.dilated is True
    assert [(c.kernel_size, c.dilation, c.groups) for c in convs[2:]] == [((3, 3), (2, 2), 32), ((3, 3), (3, 3), 32)]
    line = one_line(log)
    assert "groups, dilated left out: the paper's adaptive groups, 32 at C=256 and dilated=True" in line
    assert "External-Attention-pytorch" in line and edit_of(line) == [[1, 3, 5, 7], 16, 1, 32, False]
    log.clear()
    other = build("n", 10, "SKAttention", edit_of(line))
    convs = [seq[0] for seq in other.branches.convs]
    assert other.groups == 1 and other.dilated is False
    assert [(c.kernel_size, c.dilation, c.groups) for c in convs] == [((k, k), (1, 1), 1) for k in (1, 3, 5, 7)]
    assert not log


@pytest.mark.parametrize("scale, c1, ours, theirs", [("n", 256, 8, 32), ("x", 768, 24, 96)])
def test_coordatt_row_of_a_reduction_8_copy_gets_the_authors_width_and_the_edit_for_its_floor(scale, c1, ours,
                                                                                              theirs, log):
    """``CoordAtt, [1024, 1024]`` (inp, oup: the authors' signature, reduction left out), as written for the copies
    whose class defaults are ``reduction=8`` and ``mip = max(32, inp // reduction)``: our r = 32 and hidden
    max(8, C // 32); the edit [8, 32] builds max(32, C // 8)."""
    m = build(scale, 10, "CoordAtt", [1024, 1024])
    assert (m.c1, m.r, m.min_hidden, m.hidden, m.conv1.out_channels) == (c1, 32, 8, ours, ours)
    line = one_line(log)
    assert "r, min_hidden left out: the paper's r=32 and min_hidden=8" in line and "max(32, inp // reduction)" in line
    assert edit_of(line) == [8, 32]
    log.clear()
    other = build(scale, 10, "CoordAtt", edit_of(line))
    assert (other.r, other.min_hidden, other.hidden) == (8, 32, theirs)
    assert not log


def test_coordatt_min_hidden_is_checked():
    with pytest.raises(AttnBuildError, match=r"CoordAtt: min_hidden=0 is invalid; allowed: an int >= 1"):
        build("n", 10, "CoordAtt", [32, 0])


def test_copies_table_lists_every_block_and_the_docs_page_is_the_generated_one():
    """Every block has a section (with or without public signatures); docs/copies.md is the generated text
    (``python scripts/copies.py`` writes it)."""
    text = copies_markdown()
    assert all(f"### {name}" in text for name in MODULES)
    assert "BiLevelRoutingAttention_nchw(dim, num_heads=8" in text and "kv_downsample_mode" in text
    assert "| `k` | 7 | 11 |" in text  # LSKA: ours and the SPPF_LSKA copy's
    assert DOCS.read_text() == text, "docs/copies.md is stale: run python scripts/copies.py"


def test_sppf_lska_row_of_the_collections_gets_k7_inside_and_the_edit_for_their_k11(log):
    """``SPPF_LSKA, [1024, 5]`` as the collections write it: their hand-written SPPF_LSKA builds LSKA(k_size=11) before
    cv2; ours puts LSKA's own default k = 7 there, and the line gives the edit for 11, which builds it."""
    d = truncated(yaml_model_load("yolo11n.yaml"), 10)
    d["backbone"][9] = [-1, 1, "SPPF_LSKA", [1024, 5]]
    with torch.device("meta"):
        m = tasks.parse_model(d, 3, verbose=False)[0][9]
    assert type(m).__name__ == "SPPF_LSKA" and m.attn.k == 7
    line = one_line(log)
    assert ("k left out: LSKA's k=7; the hand-written SPPF_LSKA of YOLO collections builds LSKA(c_ * 4, k_size=11)"
            in line)
    edit = re.search(r"write (\[.*\]) for that", line).group(1)
    assert edit == "[1024, 5, {k: 11}]"
    log.clear()
    d["backbone"][9] = [-1, 1, "SPPF_LSKA", [1024, 5, {"k": 11}]]  # the edit, as YAML reads {k: 11}
    with torch.device("meta"):
        assert tasks.parse_model(d, 3, verbose=False)[0][9].attn.k == 11
    assert not log
