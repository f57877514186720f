"""attn_yolo.insertion: insert blocks into Ultralytics detect YAMLs, rewire ``from``, carry base weights across."""

from __future__ import annotations

import copy
import functools
import os
import stat
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import ultralytics
import yaml
from ultralytics import YOLO
from ultralytics.data.augment import LetterBox
from ultralytics.nn import tasks
from ultralytics.nn.tasks import DetectionModel, load_checkpoint, yaml_model_load
from ultralytics.utils.torch_utils import intersect_dicts

import attn_yolo
from attn_yolo import MODULES
from attn_yolo.args import UsageError
from attn_yolo.conventions import OWN_KEY, OWN_VALUE
from attn_yolo.insertion import InsertionError, insert, insert_dict, layer_map, main, transfer, write_yaml

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(ultralytics.__file__).parent / "assets"
BASES = ["yolov8n.yaml", "yolo11n.yaml", "yolo26n.yaml", "yolov10n.yaml"]  # Detect, Detect end2end, v10Detect
# Sites read off Ultralytics' YAMLs: backbone = backbone layers a head row reads; sppf = last backbone layer;
# neck = Detect's inputs.
SITES = {
    "yolov8n.yaml": {"backbone": [4, 6, 9], "sppf": [9], "neck": [15, 18, 21]},
    "yolo11n.yaml": {"backbone": [4, 6, 10], "sppf": [10], "neck": [16, 19, 22]},
    "yolo26n.yaml": {"backbone": [4, 6, 10], "sppf": [10], "neck": [16, 19, 22]},
    "yolov10n.yaml": {"backbone": [4, 6, 10], "sppf": [10], "neck": [16, 19, 22]},  # 10: PSA after SPPF
}
CASES = {  # site -> (module, at, args); "2,8" = explicit indices, two blocks chained after each ([[2, 8]]: one site
    "backbone": ("CBAM", "backbone", [16, 7]),  # spec for both modules; at="2,8" would put ECA at 2 and SAM at 8)
    "sppf": ("MHSA", "sppf", [4]),
    "neck": ("SE", "neck", []),
    "2,8": (["ECA", "SAM"], [[2, 8]], None),
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread: on the shared 2-core machine two threads contend and run these small models far slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def rows(d):
    return d["backbone"] + d["head"]


def targets(f, i):
    return [x if x >= 0 or i == 0 else i + x for x in (f if isinstance(f, list) else [f])]


@functools.lru_cache
def base_model(name: str) -> DetectionModel:
    torch.manual_seed(0)
    return DetectionModel(yaml_model_load(name), verbose=False).eval()


@functools.lru_cache
def base_head_inputs(name: str, shape: tuple) -> list[tuple]:
    torch.manual_seed(0)
    return head_inputs(base_model(name), torch.rand(shape))


@functools.lru_cache
def base_widths(name: str) -> list[int | None]:
    """Output channels of every layer of the base model."""
    outs = layer_outputs(base_model(name), torch.rand(1, 3, 64, 64))
    return [y.shape[1] if isinstance(y, torch.Tensor) else None for y in outs]


def n_params(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def layer_outputs(model, x) -> list[torch.Tensor]:
    """Output of every layer (hooks), running ``model`` on ``x``."""
    outs = []
    hooks = [m.register_forward_hook(lambda m, a, y: outs.append(y)) for m in model.model]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return outs


def head_inputs(model, x) -> list[tuple]:
    """Input shapes of every Concat and Detect, in execution order."""
    seen = []

    def hook(m, a):
        seen.append((type(m).__name__, [tuple(t.shape) for t in a[0]]))

    heads = ("Concat", "Detect", "v10Detect")
    hooks = [m.register_forward_pre_hook(hook) for m in model.model if type(m).__name__ in heads]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return seen


def inserted_rows(d) -> list[int]:
    """Rows of ``d`` holding attention blocks that the base (a stock Ultralytics YAML) does not have."""
    return [j for j, r in enumerate(rows(d)) if r[2] in MODULES]


def tensors(y) -> list[torch.Tensor]:
    if isinstance(y, torch.Tensor):
        return [y]
    if isinstance(y, dict):
        return [t for k in sorted(y) for t in tensors(y[k])]
    if isinstance(y, (list, tuple)):
        return [t for v in y for t in tensors(v)]
    return []


# ------------------------------------------------------------------------------------------------- rewiring (dicts)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("site", ["backbone", "sppf", "neck", "2,8"])
def test_rewiring_reaches_blocks_and_same_layers(base, site):
    module, at, args = CASES[site]
    d0, d = yaml_model_load(base), insert_dict(base, module, at, args, check=False)
    chosen = SITES[base].get(site, [2, 8])
    br, nr = rows(d0), rows(d)
    n_blocks = 2 if site == "2,8" else 1
    assert len(nr) == len(br) + n_blocks * len(chosen)
    blocks = set(inserted_rows(d))
    base_of = [j for j in range(len(nr)) if j not in blocks]  # new index of base row i = base_of[i]
    assert len(base_of) == len(br)
    for i, (f, n, m, a) in enumerate(br):
        assert nr[base_of[i]][1:] == [n, m, a]
        if i == 0:
            continue
        for t, tn in zip(targets(f, i), targets(nr[base_of[i]][0], base_of[i])):
            if t in chosen:  # a consumer of a chosen layer reads the last block of the chain after it
                assert tn == base_of[t] + n_blocks and all(k in blocks for k in range(base_of[t] + 1, tn + 1))
                assert tn + 1 not in blocks
            else:  # every other reference reaches the same layer as before
                assert tn == base_of[t]
    for t in chosen:  # the chain after a chosen layer reads it through -1
        assert [nr[base_of[t] + k][0] for k in range(1, n_blocks + 1)] == [-1] * n_blocks
    assert d["scale"] == "n" and d["nc"] == d0["nc"] and d["scales"] == d0["scales"]
    assert others(d) == others(d0) and d["scale"] == d0["scale"] and d[OWN_KEY] == OWN_VALUE


def test_several_modules_pair_with_sites():
    d = insert_dict("yolo11n.yaml", "ECA,SAM", at="2,8", check=False)  # one site per module
    assert [(j, rows(d)[j][2]) for j in inserted_rows(d)] == [(3, "ECA"), (10, "SAM")]
    d = insert_dict("yolo11n.yaml", ["SE", "MHSA"], at=["backbone", "sppf"], args=[[8], [2]], check=False)
    assert [rows(d)[j][2:] for j in inserted_rows(d)] == [["SE", [8]]] * 3 + [["MHSA", [2]]]
    assert inserted_rows(d) == [5, 8, 13, 14]  # SE then MHSA chained after layer 10


def test_relative_indices_are_rewritten():
    """A negative ``from`` other than -1 (here -7 on a Concat) must still reach its layer after the shift."""
    d0 = yaml_model_load("yolo11n.yaml")
    d0["head"][1][0] = [-1, -7]  # row 12 reads [11, 5]; 5 shifts once a block follows 4
    d = insert_dict(d0, "SE", at=4, check=False)
    assert rows(d)[13][0] == [-1, -7]  # row 13 = base 12; base 5 -> new 6: 13 - 7 = 6
    d = insert_dict(d0, "SE", at=5, check=False)
    assert rows(d)[13][0] == [-1, -7]  # reads the block after 5 (new 6): 13 - 7 = 6, the block
    assert rows(d)[6][2] == "SE"


NEW = ["CoordAtt", "EMA", "SimAM", "GAM", "ShuffleAttention", "TripletAttention", "NAM"]


GOLDEN = Path(__file__).parent / "golden"  # model YAMLs worked out by hand (tests/golden/README.md)


def golden(name: str, module: str | None = None, args: list | None = None) -> dict:
    """A hand-written golden YAML's rows; ``ATTN`` / ``ARGS`` replaced by ``module`` / ``args``."""
    d = yaml.safe_load((GOLDEN / name).read_text())
    for row in d["backbone"] + d["head"]:
        if row[2] == "ATTN":
            row[2:] = [module, args]
    return {"backbone": d["backbone"], "head": d["head"]}


def others(d: dict) -> dict:
    """The keys of a model dict besides its rows, names and the marker of the project's own rows (``OWN_KEY``)."""
    return {k: v for k, v in d.items() if k not in ("backbone", "head", "yaml_file", "scale", OWN_KEY)}


@pytest.mark.parametrize(
    "base, module, at, args, name",
    [
        ("yolo11.yaml", "CBAM", "backbone", [16, 7], "yolo11-backbone.yaml"),
        ("yolo11.yaml", "NAM", "backbone", [], "yolo11-backbone.yaml"),
        ("yolo11.yaml", "MHSA", "sppf", [4], "yolo11-sppf-mhsa.yaml"),
        ("yolov8.yaml", "SE", "neck", [], "yolov8-neck-se.yaml"),
        ("yolo11.yaml", ["ECA", "SAM"], [[2, 8]], None, "yolo11-chain-2-8.yaml"),
    ],
)
def test_insert_writes_the_hand_written_golden_yamls(base, module, at, args, name, tmp_path):
    """The model dict and the YAML file ``insert`` writes: rows and ``from`` indices as worked out by hand; the other
    keys (nc, scales, ...) as the base's."""
    want = golden(name, module, args)
    d = insert_dict(base, module, at, args, check=False, out=tmp_path / "out.yaml")
    assert {"backbone": d["backbone"], "head": d["head"]} == want
    written = yaml.safe_load((tmp_path / "out.yaml").read_text())
    assert {"backbone": written["backbone"], "head": written["head"]} == want
    assert others(written) == others(yaml_model_load(base))
    assert d[OWN_KEY] == written[OWN_KEY] == OWN_VALUE  # its rows' args are ours: no notes about copies' defaults


def test_shipped_model_yamls_equal_the_golden_ones():
    """models/yolo11-<block>.yaml: the hand-written golden rows with the block's args (MHSA, BRA at the SPPF site)."""
    shipped = {p.stem.removeprefix("yolo11-"): p for p in (ROOT / "models").glob("yolo11-*.yaml")}
    inside = shipped.pop("c3k2_cbam")  # CBAM inside the backbone's C3k2 rows: Ultralytics' rows, 4 renamed
    assert set(shipped) == {m.lower() for m in MODULES}
    assert all(yaml.safe_load(p.read_text())[OWN_KEY] == OWN_VALUE for p in [inside, *shipped.values()])
    base, d = yaml_model_load("yolo11.yaml"), yaml.safe_load(inside.read_text())
    assert [r[2] for r in d["backbone"]] == [("C3k2_CBAM" if r[2] == "C3k2" else r[2]) for r in base["backbone"]]
    assert [r[3] for r in d["backbone"]] == [r[3] for r in base["backbone"]] and d["head"] == base["head"]
    args = {"SAM": [7], "CBAM": [16, 7], "MHSA": [4]}
    for module in MODULES:
        d = yaml.safe_load(shipped[module.lower()].read_text())
        if module in ("MHSA", "BiLevelRoutingAttention"):  # token attention: at P5 only (after SPPF / C2PSA)
            want = golden("yolo11-sppf-mhsa.yaml")
            want["backbone"][11][2:] = [module, args.get(module, [])]
        else:
            want = golden("yolo11-backbone.yaml", module, args.get(module, []))
        assert {"backbone": d["backbone"], "head": d["head"]} == want, module
        assert others(d) == others(yaml_model_load("yolo11.yaml")), module


# ------------------------------------------------------------------------------------------------- built models


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("site", ["backbone", "sppf", "neck", "2,8"])
def test_builds_runs_same_head_inputs_exact_params(base, site):
    module, at, args = CASES[site]
    d = insert_dict(base, module, at, args)
    bm = base_model(base)
    torch.manual_seed(0)
    nm = DetectionModel(d, verbose=False).eval()
    assert nm.stride.tolist() == bm.stride.tolist() == [8.0, 16.0, 32.0]
    for shape in [(1, 3, 320, 320), (1, 3, 192, 320)]:  # square and rectangular
        torch.manual_seed(0)
        assert head_inputs(nm, torch.rand(shape)) == base_head_inputs(base, shape)
    # exact parameter arithmetic: base + each block built on its own at the width of the layer it follows
    widths = base_widths(base)
    extra, blocks, base_i = 0, set(inserted_rows(d)), -1
    for j, (f, n, m, a) in enumerate(rows(d)):
        if j in blocks:
            a = [None if v == "None" else v for v in a]
            extra += n_params(MODULES[m](widths[base_i], *a))
        else:
            base_i += 1
    assert n_params(nm) == n_params(bm) + extra
    assert extra > 0


def test_builds_at_every_scale(monkeypatch):
    """Combined sites and chains; skipping random init keeps the large scales cheap (the build is unchanged)."""
    for fn in ("kaiming_uniform_", "uniform_", "normal_", "trunc_normal_"):
        monkeypatch.setattr(torch.nn.init, fn, lambda t, *a, **k: t)
    d = insert_dict("yolo11n.yaml", ["CBAM", "MHSA", "SE"], ["backbone", "sppf", "neck"], [[16, 7], [4], [16]])
    d0 = yaml_model_load("yolo11n.yaml")
    for scale in "nsmlx":
        seq, _ = tasks.parse_model(copy.deepcopy({**d, "scale": scale}), 3, verbose=False)
        base, _ = tasks.parse_model(copy.deepcopy({**d0, "scale": scale}), 3, verbose=False)
        assert [m.f for m in seq][-1] == [21, 25, 29]
        assert [type(m).__name__ for m in seq if m.i in (5, 8, 13, 14, 21, 25, 29)] == ["CBAM"] * 3 + ["MHSA"] + [
            "SE"
        ] * 3
        assert seq[-1].cv2[0][0].conv.in_channels == base[-1].cv2[0][0].conv.in_channels, scale


def test_round_trip_is_stable(tmp_path):
    out = tmp_path / "yolo11n-cbam-mhsa.yaml"
    d = insert_dict("yolo11n.yaml", ["CBAM", "MHSA"], ["backbone", "sppf"], [[16, 7], [4]], identity=True, out=out)
    text = out.read_text()
    assert text.startswith("# attn-yolo: yolo11n + CBAM + MHSA")
    assert "after base layers 4 (P3/8), 6 (P4/16), 10 (P5/32) -> new layers 5, 8, 13" in text
    assert "  - [-1, 1, MHSA, [4, 2.0, 0.0, None, 0.0]] # 14 inserted after base 10" in text
    assert '  - [-1, 1, nn.Upsample, [None, 2, "nearest"]] # 15 (base 11)' in text
    loaded = yaml_model_load(out)
    assert loaded["scale"] == "n" and rows(loaded) == rows(d)
    assert {k: v for k, v in loaded.items() if k != "yaml_file"} == {k: v for k, v in d.items() if k != "yaml_file"}
    again = tmp_path / "again" / out.name
    write_yaml(loaded, None, again)
    assert rows(yaml_model_load(again)) == rows(d)
    torch.manual_seed(0)
    a = DetectionModel(d, verbose=False).state_dict()
    torch.manual_seed(0)
    b = DetectionModel(str(out), verbose=False).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # inserting into the written file again shifts consistently (it is a valid base)
    d2 = insert_dict(str(out), "SE", at=5, check=False)
    assert rows(d2)[6][2] == "SE" and rows(d2)[-1][0] == [v + 1 for v in rows(d)[-1][0]]


def test_scale_from_name_and_warning(tmp_path, caplog):
    d = insert_dict("yolo11s.yaml", "SE", check=False)
    assert d["scale"] == "s" and d["yaml_file"] == "yolo11s-se.yaml"
    out = insert_dict("yolo11s.yaml", "SE", out=tmp_path / "my.yaml", check=False)
    assert out["scale"] == "s"
    text = (tmp_path / "my.yaml").read_text()
    assert not [line for line in text.splitlines() if line.startswith("scale:")]  # Ultralytics would override it
    assert 'This file name carries no scale: YOLO("my.yaml") builds the first scale (n)' in text


def test_scale_warning_only_when_the_built_scale_differs(tmp_path, monkeypatch):
    """No scale letter in the name builds the first scale (n): a warning for a base of scale s, none for scale n."""
    from ultralytics.utils import LOGGER

    seen = []
    monkeypatch.setattr(LOGGER, "warning", lambda msg, *a, **k: seen.append(str(msg)))
    insert_dict("yolo11n.yaml", "SE", out=tmp_path / "multi.yaml", check=False)
    assert not [m for m in seen if "builds scale" in m]
    insert_dict("yolo11s.yaml", "SE", out=tmp_path / "my.yaml", check=False)
    assert [m for m in seen if "the base was scale 's' but YOLO(" in m and "builds scale 'n'" in m]


# ----------------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(at="bacbone"), "unknown site 'bacbone'. Did you mean 'backbone'? Allowed: backbone, sppf, neck"),
        (dict(module="CBMA"), "module='CBMA': unknown attention block. Did you mean 'CBAM'? Allowed: SE, ECA"),
        (dict(at=23), "layer 23 is out of range; the base has layers 0..23 and a block can follow layers 0..22"),
        (dict(at=[4, -1]), "layer -1 is out of range"),
        (dict(at="4,4"), "at='4,4': 4 is given twice; each site takes the block once (to chain two blocks after one "
                         "layer, name both: module=SE,CBAM at=4)"),
        (dict(at=["backbone", "backbone"]), "'backbone' is given twice"),
        (dict(base="yolo11n-seg.yaml"), "is a segment model (last layer Segment); insert supports detect bases"),
        (dict(base="yolo11n-cls.yaml"), "is a classify model (last layer Classify)"),
        (dict(base="yolo11n-pose.yaml"), "is a pose model (last layer Pose"),
        (dict(base="nope.yaml"), "base='nope.yaml': no such file, and not a model YAML shipped with Ultralytics"),
        (dict(module="MHSA", args=[5]), "MHSA after base layer 4 (P3/8, C=128): heads=5 is invalid"),
        (dict(args=[16, 7, 0.1, 1]), "CBAM takes at most 3 args [r, k, init_values]"),
        (dict(args=[16, 7, 0.1], identity=True), "init_values=0.1, but identity=True sets init_values=0.0"),
        (dict(module=["SE", "SAM"], at=["backbone", "sppf", "neck"]), "names 2 blocks but at="),
    ],
)
def test_bad_input_messages_and_nothing_written(tmp_path, kwargs, message):
    kw = {"base": "yolo11n.yaml", "module": "CBAM", **kwargs}
    out = tmp_path / "yolo11n-x.yaml"
    with pytest.raises(InsertionError) as e:
        insert_dict(kw.pop("base"), kw.pop("module"), out=out, **kw)
    assert message in str(e.value)
    assert not list(tmp_path.iterdir())


def test_bad_yaml_and_existing_output(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("backbone: [[-1, 1, Conv\nhead: x\n")
    with pytest.raises(InsertionError, match="is not valid YAML"):
        insert_dict(str(bad))
    (tmp_path / "rows.yaml").write_text("nc: 80\n")
    with pytest.raises(InsertionError, match="is not a model YAML: it needs non-empty 'backbone' and 'head'"):
        insert_dict(str(tmp_path / "rows.yaml"))
    out = tmp_path / "yolo11n-se.yaml"
    out.write_text("keep")
    with pytest.raises(InsertionError, match="exists; pass overwrite=True"):
        insert_dict("yolo11n.yaml", "SE", out=out)
    assert out.read_text() == "keep"
    insert_dict("yolo11n.yaml", "SE", out=out, overwrite=True, check=False)
    assert out.read_text().startswith("# attn-yolo")


@pytest.mark.parametrize(
    "row11, message",
    [
        ([-1, 1, "CBMA", [16]], "base='<base>': model YAML row 11 (head): unknown module 'CBMA'. Did you mean 'CBAM'?"),
        ([30, 1, "nn.Upsample", [None, 2, "nearest"]],
         "base='<base>': model YAML row 11 (head) nn.Upsample: from=30: 30 reads layer 30, a later row"),
        ([-1, 1, "SE", 16], "base='<base>': model YAML row 11 (head) SE: args=16 is not a list; write [16]"),
        ([-1, 1, "SE", [0]], "base='<base>' does not build: row 11 (scale n) SE: r=0 is invalid"),
    ],
)
def test_base_errors_use_the_base_row_numbers(tmp_path, row11, message):
    """A bad row 11 of the user's base is reported as row 11, not as its index after insertion (13 here)."""
    d = yaml_model_load("yolo11n.yaml")
    d["head"][0] = row11  # row 11; the base otherwise unchanged
    base = tmp_path / "yolo11n-mine.yaml"
    base.write_text(yaml.safe_dump({k: v for k, v in d.items() if k not in ("scale", "yaml_file")}))
    with pytest.raises(InsertionError) as e:
        insert(str(base), "SE", at="4,6")  # two blocks before row 11: it becomes row 13
    assert str(e.value).startswith(message.replace("<base>", str(base)))
    assert "row 13" not in str(e.value)


def test_inserted_block_error_says_where_it_was_inserted():
    with pytest.raises(InsertionError) as e:
        insert("yolo11n.yaml", "MHSA", at=6, args=[5])
    assert str(e.value) == (
        "MHSA after base layer 6 (P4/16, C=128): heads=5 is invalid; allowed: a divisor of C=128 (head width >= 8): "
        "[1, 2, 4, 8, 16] (args are MHSA's own [heads, mlp_ratio, attn_drop, head_dim, init_values])"
    )


def test_insert_args_are_the_blocks_own_hyperparameters(tmp_path, capsys):
    """``args=[64]`` for ShuffleAttention is groups=64 (not a public-convention channel count): refused at C=16 with
    the group counts that fit there, before any YAML row is read or anything written; where 64 fits (C=128) the
    written row builds groups=64 and the summary says so."""
    from attn_yolo_console import main as cli_main

    out = tmp_path / "yolo11n-sa.yaml"
    assert cli_main(["insert", "base=yolo11n.yaml", "module=ShuffleAttention", "at=0", "args=[64]", f"out={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: attn-yolo insert: ShuffleAttention after base layer 0 (P1/2, C=16): groups=64 is invalid; "
                   "allowed: [1, 2, 4, 8], or [] for the paper's 64 adapted to C (args are ShuffleAttention's own "
                   "[groups, init_values])"), err
    assert not out.exists()
    assert cli_main(["insert", "base=yolo11n.yaml", "module=ShuffleAttention", "at=6", "args=[64]", f"out={out}"]) == 0
    assert "ShuffleAttention [groups=64] after base layer 6 (P4/16) -> layer 7" in capsys.readouterr().out
    from ultralytics.nn.tasks import DetectionModel

    built = DetectionModel(str(out), verbose=False).model[7]
    assert (built.c1, built.groups) == (128, 64)


def test_a_row_read_otherwise_than_its_args_is_refused():
    """The check after the build: a row that the YAML reader builds differently from the block's own args."""
    import torch

    from attn_yolo.insertion.plan import Block, check_built_as_given
    from attn_yolo.nn.shuffle import ShuffleAttention

    b = Block("ShuffleAttention", [8], after=0, index=1)
    with torch.device("meta"):
        ref, same, other = ShuffleAttention(16, groups=8), ShuffleAttention(16, groups=8), ShuffleAttention(16, 4)
    check_built_as_given(b, same, ref)
    with pytest.raises(InsertionError, match=r"the YAML row \[-1, 1, ShuffleAttention, \[8\]\] would be read "
                                             r"otherwise than as ShuffleAttention's own \[groups, init_values\]"):
        check_built_as_given(b, other, ref)


def test_aliases_insert_the_block_and_cbam_kernel_args_are_written_explicitly():
    d = insert_dict("yolo11n.yaml", "SEAttention", at=10, check=False)
    assert d["backbone"][11] == [-1, 1, "SE", []]
    d = insert_dict("yolo11n.yaml", "cbamblock", at=10, args=[7], check=False)  # Ultralytics' CBAM(c1, kernel_size=7)
    assert d["backbone"][11] == [-1, 1, "CBAM", [16, 7]]
    base = yaml_model_load("yolo11n.yaml")
    model = copy.deepcopy(base)
    model["backbone"].insert(5, [-1, 1, "SEAttention", [256, 16]])  # a user's YAML naming an alias
    for row in model["head"]:
        row[0] = [x + 1 if x >= 5 else x for x in row[0]] if isinstance(row[0], list) else row[0]
    assert layer_map(base, model)[5] == 6


# ------------------------------------------------------------------------------------------------------ transfer


@functools.lru_cache
def base_ckpt(name: str, tmp: str, nc: int = 80) -> str:
    """A base checkpoint saved by Ultralytics (``YOLO.save``, FP16): random weights, BatchNorm statistics moved off
    their defaults by a few train-mode passes, so every tensor differs between layers."""
    torch.manual_seed(1)
    y = YOLO(name)
    if nc != 80:
        y.model = DetectionModel(yaml_model_load(name), nc=nc, verbose=False)
    y.model.train()
    with torch.no_grad():
        for _ in range(2):
            y.model(torch.rand(2, 3, 64, 64))
    path = Path(tmp) / f"{Path(name).stem}-nc{nc}.pt"
    y.save(path)
    return str(path)


@pytest.fixture(scope="module")
def ckdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ckpt"))


@pytest.mark.parametrize(
    "base, total", [("yolo11n.yaml", 499), ("yolov8n.yaml", 355), ("yolo26n.yaml", 708), ("yolov10n.yaml", 595)]
)
def test_transfer_loads_every_base_tensor(ckdir, base, total):
    src = load_checkpoint(base_ckpt(base, ckdir))[0]
    d = insert_dict(base, "CBAM", "backbone", [16, 7], identity=True, check=False)
    report = transfer(base_ckpt(base, ckdir), d)
    assert (report.transferred, report.total) == (total, total)
    blocks = inserted_rows(d)
    assert report.inserted == blocks and report.identity
    block_tensors = sum(len(report.model.model[j].state_dict()) for j in blocks)
    assert report.new == block_tensors == 21  # CBAM: 2 convs (w, b) + 1 conv (w, b) + γ = 7 per block
    assert str(report).startswith(f"transferred {total}/{total} tensors from base; 21 new tensors initialised")
    new_sd, base_of = report.model.state_dict(), [j for j in range(len(rows(d))) if j not in blocks]
    for k, v in src.state_dict().items():  # each tensor sits in its base layer's new place
        i, rest = k.split(".", 2)[1:]
        assert torch.equal(new_sd[f"model.{base_of[int(i)]}.{rest}"], v)


def test_ultralytics_name_matching_mistransfers_ours_does_not(ckdir):
    src = load_checkpoint(base_ckpt("yolo11n.yaml", ckdir))[0]
    d = insert_dict("yolo11n.yaml", "CBAM", "backbone", [16, 7], identity=True, check=False)
    base_of = [j for j in range(len(rows(d))) if j not in inserted_rows(d)]

    def correct(model) -> int:  # base tensors found at their layer's new index
        sd = model.state_dict()
        return sum(
            torch.equal(sd[f"model.{base_of[int(k.split('.')[1])]}.{k.split('.', 2)[2]}"], v)
            for k, v in src.state_dict().items()
        )

    theirs = DetectionModel(copy.deepcopy(d), verbose=False)
    matched = intersect_dicts(src.state_dict(), theirs.state_dict())  # what DetectionModel.load / pretrained= loads
    theirs.load(src)
    wrong_layer = [k for k in matched if int(k.split(".")[1]) >= 5]  # past the first block, names point elsewhere
    assert len(matched) < 499 / 2 and wrong_layer  # most tensors lost, some loaded into the wrong layer
    assert correct(theirs) < 499 / 2
    ours = transfer(src, d, verbose=False).model
    assert correct(ours) == 499


def test_transfer_into_yolo_object_and_model_in_place(ckdir, tmp_path):
    out = tmp_path / "yolo26n-sam.yaml"
    insert_dict("yolo26n.yaml", "SAM", "neck", identity=True, out=out)
    y = YOLO(str(out))
    report = transfer(base_ckpt("yolo26n.yaml", ckdir), y)
    assert report.model is y.model and report.transferred == report.total == 708 and report.identity
    assert y.ckpt  # train() starts from these weights, as from a loaded .pt
    d = insert_dict("yolo26n.yaml", "SAM", "neck", check=False)  # identity off: the report says so
    assert not transfer(base_ckpt("yolo26n.yaml", ckdir), DetectionModel(d, verbose=False)).identity
    assert transfer(base_ckpt("yolo26n.yaml", ckdir), d).identity  # a dict target is made identity at init
    m = attn_yolo.insert("yolo26n.yaml", "SAM", "neck", identity=True)  # in memory: train() seeds fresh weights ...
    assert m.overrides["pretrained"] is False
    assert transfer(base_ckpt("yolo26n.yaml", ckdir), m, verbose=False).model is m.model
    assert "pretrained" not in m.overrides and m.ckpt["model"] is m.model  # ... until weights are carried into it


def letterboxed(name: str, size: int = 320) -> torch.Tensor:
    img = LetterBox((size, size), auto=True, stride=32)(image=cv2.imread(str(ASSETS / name)))
    return torch.from_numpy(np.ascontiguousarray(img[..., ::-1].transpose(2, 0, 1))).float()[None] / 255


@pytest.mark.parametrize("base", ["yolo11n.yaml", "yolo26n.yaml", "yolov10n.yaml"])
def test_identity_at_init_reproduces_base_predictions(ckdir, base):
    path = base_ckpt(base, ckdir)
    src = load_checkpoint(path)[0].eval()
    sites = (["CBAM", "MHSA", "ECA"], ["backbone", "sppf", "neck"], [[16, 7], [4], []])
    same = transfer(path, insert_dict(base, *sites, identity=True, check=False), verbose=False).model.eval()
    plain = transfer(path, insert_dict(base, *sites, check=False), identity=False, verbose=False).model.eval()
    for img in ("bus.jpg", "zidane.jpg"):
        x = letterboxed(img)
        assert x.shape[2:] != (320, 320)  # real photos, rectangular
        with torch.no_grad():
            ref, out, other = tensors(src(x)), tensors(same(x)), tensors(plain(x))
        assert len(ref) == len(out) and all(a.shape == b.shape for a, b in zip(ref, out))
        assert max((a - b).abs().max().item() for a, b in zip(ref, out)) <= 1e-5
        assert max((a - b).abs().max().item() for a, b in zip(ref, other)) > 1e-3  # without identity it changes


def test_new_blocks_identity_at_init_reproduce_base_predictions(ckdir):
    """The seven blocks chained at P3/P4/P5 with init_values=0.0 (what pretrained= inserts) predict as the base."""
    path = base_ckpt("yolo11n.yaml", ckdir)
    src = load_checkpoint(path)[0].eval()
    d = insert_dict("yolo11n.yaml", NEW, "backbone", identity=True, check=False)
    model = transfer(path, d, verbose=False).model
    assert sum(type(m).__name__ in NEW for m in model.model) == 21
    x = letterboxed("bus.jpg", 256)
    with torch.no_grad():
        ref, out = tensors(src(x)), tensors(model.eval()(x))
    assert max((a - b).abs().max().item() for a, b in zip(ref, out)) <= 1e-5


def test_cli_inserts_every_new_block(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in NEW:  # module names are case-insensitive
        assert main(["base=yolo11n.yaml", f"module={name.lower()}", "at=backbone"]) == 0
        text = (tmp_path / f"yolo11n-{name.lower()}.yaml").read_text()
        assert f"  - [-1, 1, {name}, []] # 5 inserted after base 4" in text
        assert MODULES[name].__doc__.split("(")[1].split(",")[0] in text  # the paper's first author
    assert "EMA [factor=adaptive] after base layer 4 (P3/8) -> layer 5" in capsys.readouterr().out


def test_transfer_errors(ckdir):
    v8 = base_ckpt("yolov8n.yaml", ckdir)
    with pytest.raises(InsertionError, match="not the checkpoint with blocks inserted"):
        transfer(v8, insert_dict("yolo11n.yaml", "SE", check=False))
    d = insert_dict("yolo11n.yaml", "SE", check=False)
    with pytest.raises(InsertionError, match="class count differs: base nc=80, model nc=3"):
        transfer(base_ckpt("yolo11n.yaml", ckdir), DetectionModel(d, nc=3, verbose=False))
    with pytest.raises(InsertionError, match="do not fit the model"):  # another scale
        transfer(base_ckpt("yolo11n.yaml", ckdir), {**d, "scale": "s"})
    with pytest.raises(InsertionError, match="no such file"):
        transfer("missing.pt", d)
    fused = load_checkpoint(base_ckpt("yolo11n.yaml", ckdir))[0].fuse()
    with pytest.raises(InsertionError, match="fused"):
        transfer(fused, d)
    with pytest.raises(InsertionError, match=r"base row 3 \[1, 'Conv', \[256, 3, 2\]\] is not where the model "
                                             r"has it: model row 3 is \[1, 'Conv', \[64, 3, 1\]\], neither that row "
                                             "nor an inserted attention block"):  # a non-attention row was added
        bad = copy.deepcopy(d)
        bad["backbone"].insert(3, [-1, 1, "Conv", [64, 3, 1]])
        layer_map(yaml_model_load("yolo11n.yaml"), bad)


# ------------------------------------------------------------------------------------------- CLI and training


class _Stop(Exception):
    pass


def _trainer_start_weights(y: YOLO, data: Path, tmp: Path) -> dict:
    """State dict of the model Ultralytics' trainer starts training from (captured, then training is stopped)."""
    got = {}

    def capture(trainer):
        got.update({k: v.detach().clone() for k, v in trainer.model.state_dict().items()})
        raise _Stop

    y.add_callback("on_pretrain_routine_end", capture)
    with pytest.raises(_Stop):
        y.train(data=str(data), epochs=1, imgsz=64, batch=2, device="cpu", workers=0, plots=False, val=False,
                project=str(tmp / "runs"), name="t", exist_ok=True, verbose=False, amp=False)
    return got


def test_cli_writes_yaml_and_checkpoint_that_trainer_keeps(ckdir, tmp_path, capsys, monkeypatch):
    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "data", n_train=2, n_val=2, imgsz=64)
    nc = len(yaml.safe_load(data.read_text())["names"])
    base = base_ckpt("yolo11n.yaml", ckdir, nc=nc)  # trained on data with these classes
    monkeypatch.chdir(tmp_path)
    assert main(["base=yolo11n.yaml", "module=CBAM", "at=backbone", "args=[16,7]", f"pretrained={base}"]) == 0
    printed = capsys.readouterr().out
    assert "CBAM [r=16, k=7, init_values=0.0] after base layer 4 (P3/8) -> layer 5" in printed
    assert "transferred 499/499 tensors from base; 21 new tensors initialised" in printed
    assert (tmp_path / "yolo11n-cbam.yaml").exists() and (tmp_path / "yolo11n-cbam.pt").exists()
    y = YOLO(str(tmp_path / "yolo11n-cbam.pt"))
    ref = {k: v.clone() for k, v in y.model.state_dict().items()}
    start = _trainer_start_weights(y, data, tmp_path)
    assert start.keys() == ref.keys() and all(torch.equal(start[k], ref[k]) for k in ref)
    # Python path: YOLO(yaml) + transfer + train; the written YAML carries the base's class count
    assert yaml_model_load(tmp_path / "yolo11n-cbam.yaml")["nc"] == nc
    y = YOLO(str(tmp_path / "yolo11n-cbam.yaml"))
    assert transfer(base, y).identity
    ref = {k: v.clone() for k, v in y.model.state_dict().items()}
    start = _trainer_start_weights(y, data, tmp_path)
    assert all(torch.equal(start[k], ref[k]) for k in ref)


def test_cli_errors_write_nothing(ckdir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    v8 = base_ckpt("yolov8n.yaml", ckdir)
    with pytest.raises(UsageError, match="not the checkpoint with blocks inserted"):
        main(["base=yolo11n.yaml", f"pretrained={v8}"])
    with pytest.raises(UsageError, match="modul: unknown key"):
        main(["base=yolo11n.yaml", "modul=SE"])
    with pytest.raises(UsageError, match="base= is required"):
        main(["module=SE"])
    assert not list(tmp_path.iterdir())
    assert main(["help"]) == 0


def test_console_script_routes_insert(tmp_path, monkeypatch, capsys):
    import attn_yolo_console as cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["insert", "base=yolo11n.yaml", "module=ECA", "at=sppf"]) == 0
    assert (tmp_path / "yolo11n-eca.yaml").exists()
    assert cli.main(["insert", "base=yolo11n.yaml", "at=nowhere"]) == 2
    assert "unknown site 'nowhere'" in capsys.readouterr().err
    assert attn_yolo.insert is insert and attn_yolo.transfer is transfer


def test_written_files_follow_the_umask(tmp_path):
    """insert writes its YAML (and checkpoints) with the user's umask, not mkstemp's owner-only 0600."""
    old = os.umask(0o022)
    try:
        out = write_yaml(insert_dict("yolo11n.yaml", "SE", at="sppf"), None, tmp_path / "yolo11n-se.yaml")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_python_insert_returns_a_yolo_that_trains(tmp_path, monkeypatch):
    """``attn_yolo.insert`` gives what ``YOLO()`` accepts and trains, with no YAML written by hand (nor by insert)."""
    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "shapes", n_train=4, n_val=2, imgsz=64, seed=0)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    model = attn_yolo.insert("yolo11n.yaml", "SE", at="sppf")
    assert not list(work.iterdir())  # nothing written without out=
    d = insert_dict("yolo11n.yaml", "SE", at="sppf", check=False)
    assert model.model.yaml["yaml_file"] == model.cfg == model.overrides["model"] == d["yaml_file"] == "yolo11n-se.yaml"
    assert rows(model.model.yaml) == rows(d) and model.model.yaml["scale"] == "n"
    yolo = YOLO(model)
    assert [type(m).__name__ for m in yolo.model.model].count("SE") == 1
    yolo.train(data=str(data), epochs=1, imgsz=64, batch=2, workers=0, device="cpu", plots=False, amp=False,
               project=str(tmp_path / "runs"), name="se", exist_ok=True)  # fmt: skip
    best = tmp_path / "runs" / "se" / "weights" / "best.pt"
    assert [type(m).__name__ for m in YOLO(best).model.model].count("SE") == 1
    assert not [p for p in work.iterdir() if p.suffix in (".yaml", ".yml")]

    out = tmp_path / "yolo11s-se.yaml"  # with out=: the YAML is written and the result is YOLO(out)
    written = attn_yolo.insert("yolo11s.yaml", "SE", at="sppf", out=out)
    assert out.exists() and written.cfg == str(out) and written.model.yaml["scale"] == "s"


def test_transfer_into_a_fresh_insert_result_takes_the_base_class_count(tmp_path, assets):
    """README's Python path with a custom-trained base (nc=4): ``transfer(base.pt, insert(...))`` rebuilds the fresh
    model with the base's classes and identity blocks, so it predicts exactly what the base does."""
    from attn_yolo.checkpoint import save_checkpoint

    base = DetectionModel("yolo11n.yaml", nc=4, verbose=False)
    base.names = {i: f"c{i}" for i in range(4)}
    pt = save_checkpoint(base, tmp_path / "base4.pt")
    model = attn_yolo.insert("yolo11n.yaml", "CBAM", at="backbone")  # nc=80, random weights
    report = transfer(str(pt), model, verbose=False)
    assert report.transferred == report.total and report.identity
    assert model.model is report.model and model.model.yaml["nc"] == 4 and model.model.names[3] == "c3"
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        want = YOLO(str(pt)).model.float().eval()(x)[0]  # the base as saved (fp16 weights, as Ultralytics saves)
        got = model.model.float().eval()(x)[0]
    assert torch.equal(want, got)
