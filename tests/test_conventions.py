"""Attention rows as public YAMLs write them: each read as its author meant (one log line), or refused with the edit."""

import functools

import pytest
import torch
from conftest import truncated
from ultralytics.nn import tasks
from ultralytics.nn.tasks import DetectionModel, yaml_model_load

import attn_yolo
from attn_yolo import CBAM, ECA, MHSA, SAM, SE, AttnBuildError
from attn_yolo.insertion import insert_dict
from attn_yolo.nn.eca import eca_kernel_size

# The source layers the cases attend, and their width as the YAML itself writes it (before width scaling):
# P3 / P5 backbone outputs, and the first head Concat (upsampled P5 + P4: the sum of its inputs' widths).
SITES = {"yolov8": {"p3": 4, "p5": 9, "cat": 11}, "yolo11": {"p3": 4, "p5": 10, "cat": 12},
         "yolo26": {"p3": 4, "p5": 10, "cat": 12}}
UNSCALED = {"yolov8": {"p3": 256, "p5": 1024, "cat": 1024 + 512}, "yolo11": {"p3": 512, "p5": 1024, "cat": 1024 + 512},
            "yolo26": {"p3": 512, "p5": 1024, "cat": 1024 + 512}}  # read off each family's YAML

# (written module, args, site, block, intended hyperparameters, read other than as written?)
# "C": the source's width as written in the YAML; "Cn": the source's width as built at scale n.
CASES = [
    # 1. channel count first, before width scaling
    ("CBAM", ["C"], "p5", CBAM, {"r": 16, "k": 7}, True),
    ("CBAM", ["C", 8], "p5", CBAM, {"r": 8, "k": 7}, True),
    ("CBAM", ["C"], "p3", CBAM, {"r": 16, "k": 7}, True),
    ("SE", ["C", 16], "p5", SE, {"r": 16}, True),
    ("SE", ["C", 4], "p3", SE, {"r": 4}, True),
    ("SEAttention", ["C", 16], "p3", SE, {"r": 16}, True),
    ("ECAAttention", ["C"], "p3", ECA, {"k": "adaptive"}, True),
    ("ECA", ["C", 3], "p5", ECA, {"k": 3}, True),
    ("MHSA", ["C"], "p5", MHSA, {"heads": 4}, True),
    ("MHSA", ["C", 8], "p5", MHSA, {"heads": 8}, True),
    ("SAM", ["C", 3], "p3", SAM, {"k": 3}, True),
    ("CBAM", ["C"], "cat", CBAM, {"r": 16, "k": 7}, True),  # Concat: the sum of its inputs' widths
    # 1. channel count first, as built (the file written for scale n, also read at scale x)
    ("CBAM", ["Cn"], "p5", CBAM, {"r": 16, "k": 7}, True),
    ("SE", ["Cn", 8], "p3", SE, {"r": 8}, True),
    ("ECAAttention", ["Cn"], "cat", ECA, {"k": "adaptive"}, True),
    # 2. Ultralytics' CBAM(c1, kernel_size=7): a lone 3 or 7 is the kernel
    ("CBAM", [7], "p5", CBAM, {"r": 16, "k": 7}, True),
    ("CBAM", [3], "p3", CBAM, {"r": 16, "k": 3}, True),
    ("CBAM", ["C", 3], "p5", CBAM, {"r": 16, "k": 3}, True),
    ("SpatialAttention", [7], "p3", SAM, {"k": 7}, True),  # Ultralytics' SpatialAttention(kernel_size=7)
    # 3. names in use
    ("SELayer", [8], "p5", SE, {"r": 8}, True),
    ("SEBlock", [], "p5", SE, {"r": 16}, True),
    ("SqueezeExcitation", ["C", 16], "p5", SE, {"r": 16}, True),
    ("EfficientChannelAttention", [], "p3", ECA, {"k": "adaptive"}, True),
    ("SpatialAttentionModule", [3], "p5", SAM, {"k": 3}, True),
    ("CBAMBlock", ["C", 16, 7], "p5", CBAM, {"r": 16, "k": 7}, True),
    ("CBAMAttention", [8, 3], "p3", CBAM, {"r": 8, "k": 3}, True),
    # the project's own args: read as written, no log line
    ("CBAM", [16, 3], "p5", CBAM, {"r": 16, "k": 3}, False),
    ("SE", [8], "p3", SE, {"r": 8}, False),
    ("ECA", [5], "p5", ECA, {"k": 5}, False),
    ("MHSA", [2, 4.0], "p5", MHSA, {"heads": 2}, False),
    ("SAM", [], "cat", SAM, {"k": 7}, False),
]


def meta_forward(seq, y: list | None = None) -> torch.Tensor:
    """Run a ``parse_model`` Sequential on a meta 64×64 image as BaseModel does; return the last output (shape only).

    ``y``: a list that receives every layer's output."""
    y, x = [] if y is None else y, torch.zeros(1, 3, 64, 64, device="meta")
    for m in seq:
        if m.f != -1:
            x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
        x = m(x)
        y.append(x)
    return x


@functools.cache
def source_width(family: str, scale: str, site: int) -> int:
    """Output channels of layer ``site``, from a forward pass of the model built by Ultralytics alone (no plugin)."""
    attn_yolo.unregister()
    try:
        with torch.device("meta"):
            seq, _ = tasks.parse_model(truncated(yaml_model_load(f"{family}{scale}.yaml"), site + 1), 3, verbose=False)
        return meta_forward(seq).shape[1]
    finally:
        attn_yolo.register()


def with_row(family: str, scale: str, site: int, row: list) -> dict:
    """The family's model dict at ``scale`` up to ``site``, with ``row`` after it (built on meta: nothing allocated)."""
    d = truncated(yaml_model_load(f"{family}{scale}.yaml"), site + 1)
    d["head" if d["head"] else "backbone"].append(row)
    return d


def build_block(d: dict, i: int):
    with torch.device("meta"):
        seq, _ = tasks.parse_model(d, 3, verbose=False)
    return seq[i]


FAMILY_CASES = [(f, c) for f in ("yolov8", "yolo11") for c in CASES]
FAMILY_CASES += [("yolo26", c) for c in CASES if "C" in c[1] or "Cn" in c[1]]  # yolo26: the channel-first rows


@pytest.mark.parametrize("scale", ["n", "x"])
@pytest.mark.parametrize(
    "family, case", FAMILY_CASES, ids=[f"{f}-{c[0]}{c[1]}@{c[2]}".replace(" ", "") for f, c in FAMILY_CASES]
)
def test_public_conventions_read_as_meant(family, scale, case, log):
    written, args, site, block, hparams, logged = case
    t = SITES[family][site]
    c1 = source_width(family, scale, t)
    values = {"C": UNSCALED[family][site], "Cn": source_width(family, "n", t)}
    yaml_args = [values.get(a, a) if isinstance(a, str) else a for a in args]
    m = build_block(with_row(family, scale, t, [-1, 1, written, yaml_args]), t + 1)

    assert type(m) is block and m.c1 == c1
    want = {k: eca_kernel_size(c1) if v == "adaptive" else v for k, v in hparams.items()}
    assert {k: getattr(m, k) for k in want} == want
    if block in (SE, CBAM):
        assert (m.hidden if block is SE else m.channel.hidden) == c1 // want["r"]
    if block is MHSA:
        assert m.head_dim == c1 // want["heads"]
    mine = [line for line in log if line.startswith("attn-yolo: ")]
    assert len(mine) == logged  # exactly one line per reinterpreted row, none otherwise
    if logged:
        assert mine[0].startswith(f"attn-yolo: row {t + 1} (scale {scale}) {written}")
        assert f"read as {block.__name__}(c1={c1}" in mine[0]


def test_public_style_yolov8_yaml_builds_trains_and_logs_each_row_once(log):
    """A whole yolov8 YAML in the most common public style: every row read as meant, one log line each."""
    d = insert_dict("yolov8n.yaml", "SE", at=[9, 12], check=False)  # after SPPF and the head's P4 C2f
    rows = d["backbone"] + d["head"]
    rows[10][2:], rows[14][2:] = ["CBAM", [1024]], ["SEAttention", [512, 16]]
    model = DetectionModel(d, verbose=False)
    assert type(model.model[10]) is CBAM and model.model[10].r == 16 and model.model[10].c1 == 256
    assert type(model.model[14]) is SE and model.model[14].r == 16 and model.model[14].c1 == 128
    mine = [line.split(" (scale")[0] for line in log if line.startswith("attn-yolo: ")]
    assert sorted(mine) == ["attn-yolo: row 10", "attn-yolo: row 14"]
    model.train()
    loss = model(torch.rand(1, 3, 64, 64))
    sum(t.sum() for t in loss.values() if isinstance(t, torch.Tensor)).backward()
    assert all(p.grad is not None for p in model.model[10].parameters())


@pytest.mark.parametrize("scale", ["n", "x"])
def test_yolo26_yaml_with_channel_first_rows_reads_them_at_n_and_x(scale, log):
    """A yolo26 YAML whose attention rows give the channel count first, as public yolo26 YAMLs write them (CBAM,
    [1024] after the P5 C2PSA; SE, [512, 16] after the head's P4 C3k2): read as CBAM(r=16, k=7) and SE(r=16) on the
    width Ultralytics alone builds there, at n (256 / 128 channels) and x (768 / 768), one log line per row."""
    d = insert_dict("yolo26n.yaml", "SE", at=[10, 13], check=False)  # blocks at rows 11 and 15 (base 13 -> 14)
    rows = d["backbone"] + d["head"]
    assert [r[2] for r in rows[10:16]] == ["C2PSA", "SE", "nn.Upsample", "Concat", "C3k2", "SE"]
    rows[11][2:], rows[15][2:] = ["CBAM", [1024]], ["SE", [512, 16]]
    c_p5, c_p4 = source_width("yolo26", scale, 10), source_width("yolo26", scale, 13)
    assert (c_p5, c_p4) == {"n": (256, 128), "x": (768, 768)}[scale]
    with torch.device("meta"):
        seq, _ = tasks.parse_model({**d, "scale": scale}, 3, verbose=False)
    cbam, se = seq[11], seq[15]
    assert type(cbam) is CBAM and (cbam.c1, cbam.r, cbam.k, cbam.channel.hidden) == (c_p5, 16, 7, c_p5 // 16)
    assert type(se) is SE and (se.c1, se.r, se.hidden) == (c_p4, 16, c_p4 // 16)
    assert seq[-1].f == [18, 21, 24] and type(seq[-1]).__name__ == "Detect"  # the end-to-end head reads the same maps
    mine = [line.split(" (scale")[0] for line in log if line.startswith("attn-yolo: ")]
    assert sorted(mine) == ["attn-yolo: row 11", "attn-yolo: row 15"]
    outs = []  # every layer but Detect on a meta image (nothing computed): the shapes agree, then Detect's input widths
    meta_forward(torch.nn.Sequential(*seq[:-1]), outs)
    head = seq[-1]
    assert [outs[j].shape[1] for j in head.f] == [head.cv2[i][0].conv.in_channels for i in range(3)]


def test_alias_builds_the_canonical_class_and_yaml_keeps_the_written_name():
    d = with_row("yolo11", "n", 10, [-1, 1, "CBAMBlock", [16, 7]])
    m = build_block(d, 11)
    assert type(m) is CBAM and type(m).__module__ == "attn_yolo.nn.cbam"  # checkpoints pickle attn_yolo.nn.cbam.CBAM
    assert d["backbone"][-1] == [-1, 1, "CBAMBlock", [16, 7]]  # the caller's dict is not rewritten


def test_ambiguous_leading_count_refused_with_both_edits(log):
    """SE [32] on a 32-channel layer: 32 is the channel count and a valid r. Refused; each edit then reads as meant."""
    d = with_row("yolo11", "n", 1, [-1, 1, "SE", [32]])  # layer 1: Conv [128] -> 32 channels at n
    with pytest.raises(AttnBuildError) as e:
        build_block(d, 2)
    assert str(e.value) == (
        "row 2 (scale n) SE: args=[32] is ambiguous: 32 is this row's channel count (as built at scale n) and also "
        "a valid r. Write [] to read it as the channel count, or [32, 32] to keep [32] as hyperparameters after the "
        "channel count"
    )
    assert build_block(with_row("yolo11", "n", 1, [-1, 1, "SE", []]), 2).r == 16
    assert build_block(with_row("yolo11", "n", 1, [-1, 1, "SE", [32, 32]]), 2).r == 32
    m = build_block(with_row("yolo11", "n", 1, [-1, 1, "SE", [32, 0.5]]), 2)  # as a count, r=0.5 would not build
    assert m.r == 32 and m.scale is not None  # init_values=0.5: a residual gate
    assert [line for line in log if "equals a channel count (as built at scale n) but is read as r" in line]


def test_short_alias_logs_the_meaning_chosen(log, monkeypatch):
    """A short name with two meanings in the literature resolves to one block, and the log line says which."""
    import dataclasses

    from attn_yolo.registry import DECLARATIONS

    sam = DECLARATIONS["SAM"]  # an alias is part of the block's declaration
    notes = {**sam.alias_notes, "SpA": "here spatial attention, not Shuffle Attention"}
    monkeypatch.setitem(DECLARATIONS, "SAM", dataclasses.replace(sam, aliases=(*sam.aliases, "SpA"), alias_notes=notes))
    assert type(build_block(with_row("yolo11", "n", 10, [-1, 1, "SpA", [7]]), 11)) is SAM
    assert [line for line in log if line.startswith("attn-yolo: ")] == [
        "attn-yolo: row 11 (scale n) SpA (SAM), [7] read as SAM(c1=256, k=7): 'SpA' is attn_yolo's SAM (here spatial "
        "attention, not Shuffle Attention)"
    ]


@pytest.mark.parametrize(
    "family, site, row, message",
    [
        (
            "yolov8", 4, [-1, 1, "CBAM", [1024]],  # 1024 is P5's width, not P3's
            ("row 5 (scale n) CBAM: r=1024 is invalid; allowed: an int in 1..64 (hidden width C // r >= 1 at C=64; "
            "paper: 16). If 1024 is meant as the channel count, it is not one of this row's (64 as built at scale n; "
            "256 before width scaling, at scale l; 128 at scale s; 192 at scale m; 320 at scale x): write one of "
            "those, or drop it: []"),
        ),
        (
            "yolo11", 10, [-1, 1, "SE", [1024, 1024]],  # (c1, c2) signature of another SE
            ("row 11 (scale n) SE: r=1024 is invalid; allowed: an int in 1..256 (hidden width C // r >= 1 at C=256; "
            "paper: 16) (read 1024 as this row's channel count, before width scaling; the remaining args [1024] are "
            "[r, init_values])"),
        ),
        (
            "yolo11", 10, [-1, 1, "CBAMBlock", [512, 16, 49]],  # External-Attention's CBAMBlock(kernel_size=49)
            ("row 11 (scale n) CBAMBlock (CBAM): k=49 is invalid; allowed: the int 3 or 7 (spatial kernel, paper: 7) "
            "(read 512 as this row's channel count, at scale s, at scale m, at scale l; the remaining args [16, 49] "
            "are [r, k, init_values])"),
        ),
        (
            "yolo11", 10, [-1, 1, "CBAM", [16, 7, 0.0, 5]],
            ("row 11 (scale n) CBAM: args=[16, 7, 0.0, 5] has 4 values; CBAM takes at most 3: [r, k, init_values] "
            "after an optional leading channel count, and 16 is not one of this row's (256 as built at scale n; 1024 "
            "before width scaling; 512 at scale s, at scale m, at scale l; 768 at scale x)"),
        ),
        (
            "yolo11", 10, [-1, 1, "CBAM", [16, 7, True]],  # the CBAM authors' no_spatial, third: not init_values
            ("row 11 (scale n) CBAM: args=[16, 7, True]: True at position 3 is no_spatial=True of CBAM(gate_channels, "
             "reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False) (Jongchan/attention-module), the "
             "channel gate alone, which attn_yolo does not provide as CBAM (for a channel gate write SE or ECA); "
             "write [16, 7] for attn_yolo's CBAM without it"),
        ),
        (
            "yolo11", 10, [-1, 1, "CBAM", [1024, 16, 7, True]],  # the same after the channel count
            ("row 11 (scale n) CBAM: args=[1024, 16, 7, True]: True at position 4 is no_spatial=True of CBAM("
             "gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False) (Jongchan/attention-"
             "module), the channel gate alone, which attn_yolo does not provide as CBAM (for a channel gate write SE "
             "or ECA); write [1024, 16, 7] for attn_yolo's CBAM without it"),
        ),
    ],
)
def test_refusal_messages(family, site, row, message):
    with pytest.raises(AttnBuildError) as e:
        build_block(with_row(family, "n", site, row), site + 1)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "row, message",
    [
        ([-1, 1, "SE", [300]], "SE: r=300 is invalid; allowed: an int in 1..256"),  # C // r < 1: was clamped to 8
        ([-1, 1, "SE", [16, float("nan")]], "SE: init_values=nan is invalid; allowed: None (no gate) or a number in"),
        ([-1, 1, "SE", [16, 2.0]], "SE: init_values=2.0 is invalid"),
        ([-1, 1, "SE", [16, -0.1]], "SE: init_values=-0.1 is invalid"),
        ([-1, 1, "MHSA", [64]], "MHSA: heads=64 is invalid; allowed: a divisor of C=256 (head width >= 8)"),
        ([-1, 1, "MHSA", [4, float("inf")]], "MHSA: mlp_ratio=inf is invalid; allowed: a number in (0, 16]"),
        ([-1, 1, "MHSA", [4, 1.0e12]], "MHSA: mlp_ratio=1000000000000.0 is invalid"),
        ([-1, 1, "MHSA", [4, 2, float("nan")]], "MHSA: attn_drop=nan is invalid"),
        ([-1, 1, "SAM", [7.0]], "SAM: k=7.0 is invalid; allowed: the int 3 or 7"),
        ([-1, 1, "CBAM", [300, 7]], "CBAM: r=300 is invalid; allowed: an int in 1..256"),
        ([-1, 1, "ECA", [4]], "ECA: k=4 is invalid; allowed: a positive odd int <= C=256"),
        ([-1, 1, "SEAttention", [16, float("nan")]], "SEAttention (SE): init_values=nan is invalid"),
    ],
)
def test_impossible_hyperparameters_refused_at_build_with_row_and_scale(row, message):
    with pytest.raises(AttnBuildError) as e:
        DetectionModel(with_row("yolo11", "n", 10, row), verbose=False)
    assert str(e.value).startswith(f"row 11 (scale n) {message}")


def test_repeated_row_logs_once(log):
    m = build_block(with_row("yolo11", "x", 10, [-1, 2, "CBAM", [1024]]), 11)  # depth 1.0 at x: two blocks
    assert [type(b) for b in m] == [CBAM, CBAM] and all(b.c1 == 768 and b.r == 16 for b in m)
    assert len([line for line in log if line.startswith("attn-yolo: row 11 ")]) == 1


def test_a_compatibility_note_is_said_once_per_block_and_process(log):
    """``ECA, []`` in a public YAML may mean a copy's k = 3: the note with the edit is said for the first such row only,
    not for the next ECA row, nor when the same YAML is built again (``train`` builds twice); a row's own reading
    (its channel count dropped) is still said, once per process too. Another block's note is its own."""
    rows = [[-1, 1, "ECA", []], [-1, 1, "ECA", []], [-1, 1, "ECA", [1024]], [-1, 1, "ShuffleAttention", []]]
    d = with_row("yolo11", "n", 10, rows[0])
    d["head"] += rows[1:]
    for _ in range(2):
        with torch.device("meta"):
            tasks.parse_model(d, 3, verbose=False)
    notes = [line for line in log if "left out: the paper's" in line]
    assert len(notes) == 2 and notes[0].startswith("attn-yolo: row 11 (scale n) ECA, [] read as ECA(c1=256): k left")
    assert "fix k=3: write [3] for that" in notes[0] and notes[1].startswith("attn-yolo: row 14 (scale n) Shuffle")
    assert [line for line in log if "ECA, [1024]" in line] == [  # its count dropped: said at the first build only
        "attn-yolo: row 13 (scale n) ECA, [1024] read as ECA(c1=256): 1024 is the channel count (before width "
        "scaling), dropped"]


@pytest.mark.parametrize("source", ["models/yolo11-eca.yaml", "insert spec", "insert spec SPPF_LSKA"])
def test_the_projects_own_yamls_and_insert_specs_get_no_compatibility_note(source, log):
    """The project's YAMLs (``models/*.yaml``) and the models insert writes carry ``attn_yolo_args: own``: their rows
    write the args they mean (``ECA, []`` is the paper's adaptive k), so no note about copies' defaults; inserting into
    a public YAML that already has attention rows keeps their notes (no marker)."""
    from pathlib import Path

    from attn_yolo.conventions import OWN_KEY

    if source.startswith("models/"):
        d = yaml_model_load(str(Path(__file__).resolve().parents[1] / source))
    else:
        d = insert_dict("yolo11n.yaml", "SPPF_LSKA" if "SPPF" in source else "ECA", "sppf" if "SPPF" in source
                        else "backbone", [], check=False)
    assert d[OWN_KEY] == "own"
    with torch.device("meta"):
        tasks.parse_model(d, 3, verbose=False)
    assert not [line for line in log if "left out" in line]
    del d[OWN_KEY]  # the same rows as a public YAML writes them: the note, once
    with torch.device("meta"):
        tasks.parse_model(d, 3, verbose=False)
    assert len([line for line in log if "left out" in line]) == 1
    public = insert_dict(d, "SE", "backbone", [], check=False)  # a base with notes of its own: no marker
    assert OWN_KEY not in public
    from attn_yolo.ablate.config.variants import definition

    assert definition(d) == definition({**d, OWN_KEY: "own"})  # the marker changes no model an ablation compares


def test_a_note_said_to_a_silenced_logger_is_said_when_it_is_heard(log):
    """A build while Ultralytics' logger is above INFO (a quiet tool) does not use up the once per process."""
    from ultralytics.utils import LOGGER

    d, level = with_row("yolo11", "n", 10, [-1, 1, "ECA", []]), LOGGER.level
    for quiet in (True, False):
        LOGGER.setLevel("WARNING" if quiet else "INFO")
        try:
            with torch.device("meta"):
                tasks.parse_model(d, 3, verbose=False)
        finally:
            LOGGER.setLevel(level)
        assert len([line for line in log if "k left out" in line]) == (0 if quiet else 1)
