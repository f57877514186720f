"""attn_yolo.csp: C2f_<X>, C3k2_<X>, SPPF_<X> for every block X; attention inside a pretrained yolo11n's C3k2 rows."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
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
from ultralytics.nn.modules.block import SPPF, Bottleneck, C2f, C3k2
from ultralytics.nn.tasks import DetectionModel, yaml_model_load

import attn_yolo
from attn_yolo import MODULES, csp
from attn_yolo.checkpoint import load_model
from attn_yolo.insertion import InsertionError, insert_dict, main, transfer
from attn_yolo.nn.common import AttnBuildError
from attn_yolo.registry import CSP_BLOCKS, UnknownModuleError

ASSETS = Path(ultralytics.__file__).parent / "assets"
BASES = {"C2f": C2f, "C3k2": C3k2, "SPPF": SPPF}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def rows(d):
    return d["backbone"] + d["head"]


def csp_yaml(name: str, x: str, plain: bool = False, head_c2f: bool = True) -> dict:
    """Ultralytics' ``name`` with every CSP row derived for block ``x``: the backbone's C3k2 (or C2f) and the SPPF,
    and the head's C3k2 rows as ``C2f_<x>`` (same args: c2, shortcut), so one yolo11 model holds all three kinds.
    ``plain``: the same model with Ultralytics' own blocks (the reference); ``head_c2f=False``: head C3k2 stay C3k2."""
    d = yaml_model_load(name)
    for i, r in enumerate(rows(d)):
        if r[2] in ("C2f", "C3k2", "SPPF"):
            base = "C2f" if head_c2f and r[2] == "C3k2" and i >= len(d["backbone"]) else r[2]
            r[2] = base if plain else f"{base}_{x}"
    return d


def tensors(y) -> list[torch.Tensor]:
    if isinstance(y, torch.Tensor):
        return [y]
    if isinstance(y, dict):
        return [t for k in sorted(y) for t in tensors(y[k])]
    return [t for v in y for t in tensors(v)] if isinstance(y, (list, tuple)) else []


def n_params(m) -> int:
    return sum(p.numel() for p in m.parameters())


def expected_extra(layers, x: str) -> int:
    """Parameters block ``x`` adds to Ultralytics' own ``layers``: one ``x`` per Bottleneck (at its output width) of
    the C2f / C3k2 rows and one per SPPF (at its cv2 input width), each built alone with its defaults."""
    cls, total = MODULES[x], 0
    for m in layers.modules():
        c = m.cv2.conv.out_channels if type(m) is Bottleneck else m.cv2.conv.in_channels if type(m) is SPPF else 0
        if c:
            kw = {"heads": next(h for h in (4, 2, 1) if c % h == 0 and (c // h >= 8 or h == 1))} if x == "MHSA" else {}
            with torch.device("meta"):
                total += n_params(cls(c, **kw))
    return total


# ------------------------------------------------------------------------------------------------------ the classes


def test_every_block_gets_three_derived_classes_that_pickle():
    assert set(CSP_BLOCKS) == {f"{b}_{x}" for b in BASES for x in MODULES}
    for name, cls in CSP_BLOCKS.items():
        base, x = name.split("_", 1)
        assert getattr(csp, name) is cls and f"{cls.__module__}.{cls.__qualname__}" == f"attn_yolo.csp.{name}"
        assert issubclass(cls, BASES[base]) and cls.attention is MODULES[x]
    m = csp.C3k2_CBAM(16, 32, 2, True, 0.5, attention={"r": 4})
    back = pickle.loads(pickle.dumps(m))
    assert type(back) is csp.C3k2_CBAM and back.state_dict().keys() == m.state_dict().keys()
    assert all(b.attn.r == 4 for b in back.modules() if isinstance(b, csp.AttnBottleneck))


def test_base_args_are_ultralytics_signatures():
    """The args a derived row takes are the installed Ultralytics block's (after c1; C2f / C3k2 ``n`` is the row's
    repeats), so an Ultralytics release that changes one fails here by name."""
    import inspect

    for name, cls in BASES.items():
        params = [p for p in inspect.signature(cls).parameters if p != "c1" and (p != "n" or name == "SPPF")]
        assert params == csp.BASE_ARGS[name], name


def bn_stats(m: torch.nn.Module) -> None:
    g = torch.Generator().manual_seed(0)
    for bn in m.modules():
        if isinstance(bn, torch.nn.BatchNorm2d):
            bn.running_mean.copy_(torch.randn(bn.num_features, generator=g) * 0.1)
            bn.running_var.copy_(torch.rand(bn.num_features, generator=g) + 0.5)


@pytest.mark.parametrize("c3k, shortcut", [(False, True), (True, True), (False, False)])
def test_c3k2_puts_x_on_every_bottlenecks_residual_branch(c3k, shortcut):
    """Against the placement written out: each bottleneck is t + X(cv2(cv1(t))) (X(cv2(cv1(t))) without shortcut),
    inside C3k too; C3k2's split, concat and cv2 unchanged."""
    torch.manual_seed(0)
    m = csp.C3k2_SE(32, 48, 2, c3k, 0.5, False, 1, shortcut, attention={"r": 4}).eval()
    bn_stats(m)
    x = torch.randn(2, 32, 12, 20)

    def bottleneck(b, t):
        y = b.attn(b.cv2(b.cv1(t)))
        return t + y if shortcut else y

    with torch.no_grad():
        ys = list(m.cv1(x).chunk(2, 1))
        for blk in m.m:
            t = ys[-1]
            if c3k:
                h = blk.cv1(t)
                for b in blk.m:
                    h = bottleneck(b, h)
                ys.append(blk.cv3(torch.cat((h, blk.cv2(t)), 1)))
            else:
                ys.append(bottleneck(blk, t))
        ref = m.cv2(torch.cat(ys, 1))
        torch.testing.assert_close(m(x), ref, rtol=0, atol=0)
    assert sum(isinstance(b, csp.AttnBottleneck) for b in m.modules()) == (4 if c3k else 2)
    assert all(b.attn.c1 == (12 if c3k else 24) for b in m.modules() if isinstance(b, csp.AttnBottleneck))


def test_sppf_attends_the_concatenated_pyramid_and_identity_init_is_the_plain_block():
    torch.manual_seed(0)
    m = csp.SPPF_ECA(32, 32, 5).eval()
    bn_stats(m)
    x = torch.randn(1, 32, 9, 13)
    with torch.no_grad():
        y = [m.cv1(x)]
        for _ in range(3):
            y.append(m.m(y[-1]))
        torch.testing.assert_close(m(x), m.cv2(m.attn(torch.cat(y, 1))), rtol=0, atol=0)
    assert m.attn.c1 == 64
    for cls, base, args in ((csp.SPPF_CBAM, SPPF, (32, 32, 5)), (csp.C2f_EMA, C2f, (32, 32, 2, True)),
                            (csp.C3k2_MHSA, C3k2, (32, 32, 2, True))):
        torch.manual_seed(0)
        ref = base(*args).eval()
        bn_stats(ref)
        new = cls(*args, attention={"init_values": 0.0}).eval()
        missing = new.load_state_dict(ref.state_dict(), strict=False).missing_keys
        assert missing and all(".attn." in f".{k}" for k in missing)  # every base key kept, attention keys added
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x), rtol=0, atol=0)
            new.apply(lambda mod: mod.scale.gamma.fill_(0.5) if hasattr(mod, "scale") and mod.scale is not None
                      else None)
            assert (new(x) - ref(x)).abs().max() > 1e-3  # the gate opened: the attention acts


# --------------------------------------------------------------------------------------------------- YAML, scales


@pytest.mark.parametrize("x", list(MODULES))
def test_builds_at_n_and_x(x):
    """yolo11 with C3k2_<x> (backbone), C2f_<x> (head) and SPPF_<x>: at n the whole DetectionModel (stride pass),
    forward on a rectangular batch and backward into every attention parameter; at x (C3k inside every C3k2) on the
    meta device: exactly Ultralytics' parameters plus one block per bottleneck."""
    model = DetectionModel(csp_yaml("yolo11n.yaml", x), verbose=False)
    assert model.stride.tolist() == [8, 16, 32]
    kinds = [type(m).__name__ for m in model.model if isinstance(m, csp.InnerAttention)]
    assert kinds == [f"C3k2_{x}"] * 4 + [f"SPPF_{x}"] + [f"C2f_{x}"] * 4
    assert model.model[2].type == f"attn_yolo.csp.C3k2_{x}"
    model.train()
    out = model(torch.rand(2, 3, 64, 96))
    sum(t.float().pow(2).mean() for t in tensors(out)).backward()
    inner = [m for m in model.modules() if isinstance(m, (csp.AttnBottleneck, csp.AttnSPPF))]
    attn = [p for m in inner for p in m.attn.parameters()]
    if x != "SimAM":  # parameter-free
        assert attn and all(p.grad is not None for p in attn)
    for scale in ("n", "x"):
        with torch.device("meta"):
            layers, _ = tasks.parse_model({**csp_yaml("yolo11n.yaml", x), "scale": scale}, 3, verbose=False)
            base, _ = tasks.parse_model({**csp_yaml("yolo11n.yaml", x, plain=True), "scale": scale}, 3, verbose=False)
        assert n_params(layers) == n_params(base) + expected_extra(base, x), scale
        if scale == "x":
            assert any(type(m).__name__ == "C3k" for m in layers[8].modules())


@pytest.mark.parametrize("name, x", [("yolov8n.yaml", "CBAM"), ("yolov8x.yaml", "ECA"), ("yolo26n.yaml", "SE")])
def test_yolov8_c2f_and_yolo26_attn_rows(name, x):
    """yolov8's C2f rows; yolo26's last C3k2 (attn=True: Bottleneck then PSABlock) gets X in its Bottleneck."""
    d = csp_yaml(name, x, head_c2f=False)
    with torch.device("meta"):
        layers, _ = tasks.parse_model(copy.deepcopy(d), 3, verbose=False)
        base, _ = tasks.parse_model(csp_yaml(name, x, plain=True, head_c2f=False), 3, verbose=False)
    assert n_params(layers) == n_params(base) + expected_extra(base, x)
    if name.startswith("yolo26"):
        assert any(type(m).__name__ == "PSABlock" for m in layers[22].modules())
        assert sum(isinstance(m, csp.AttnBottleneck) for m in layers[22].modules()) == 1
    if name == "yolov8n.yaml":
        y = DetectionModel(d, verbose=False).eval()
        with torch.no_grad():
            assert y(torch.rand(1, 3, 64, 96))[0].shape[:2] == (1, 84)


def test_block_hyperparameters_from_a_trailing_mapping_and_errors_name_the_row():
    d = yaml_model_load("yolo11n.yaml")
    d["backbone"][2] = [-1, 2, "C3k2_CBAM", [256, False, 0.25, {"r": 4, "k": 3}]]
    d["backbone"][4] = [-1, 2, "C3k2_CA", [512, False, 0.25]]  # CA: the alias of CoordAtt
    d["backbone"][6] = [-1, 2, "C3k2_MHSA", [512, True]]
    d["head"][2] = [-1, 2, "C3k2_MHSA", [512, False]]  # row 13
    layers, _ = tasks.parse_model(copy.deepcopy(d), 3, verbose=False)
    inner = [b.attn for b in layers[2].modules() if isinstance(b, csp.AttnBottleneck)]
    assert inner and all((a.r, a.k) == (4, 3) for a in inner)
    assert type(layers[4]).__name__ == "C3k2_CoordAtt"
    heads = {i: [b.attn.heads for b in layers[i].modules() if isinstance(b, csp.AttnBottleneck)] for i in (6, 13)}
    assert heads == {6: [4, 4], 13: [4]}  # 32 and 64 wide: MHSA's 4 heads
    d["backbone"][2] = [-1, 2, "C3k2_MHSA", [256, False, 0.25]]  # 16 wide: 2 heads of 8
    layers, _ = tasks.parse_model(copy.deepcopy(d), 3, verbose=False)
    assert [b.attn.heads for b in layers[2].modules() if isinstance(b, csp.AttnBottleneck)] == [2]

    def err(row, exc=AttnBuildError):
        dd = copy.deepcopy(d)
        dd["backbone"][2] = row
        with pytest.raises(exc) as e:
            DetectionModel(dd, verbose=False)
        return str(e.value)

    assert "row 2 (scale n) C3k2_CBAM: CBAM has no hyperparameter 'ratio'; allowed keywords: r, k, init_values" in err(
        [-1, 2, "C3k2_CBAM", [256, False, 0.25, {"ratio": 8}]])
    assert "takes C3k2's args [c2, c3k, e, attn, g, shortcut], then optionally one mapping" in err(
        [-1, 2, "C3k2_CBAM", [256, False, 0.25, False, 1, True, 16]])
    assert "row 2 (scale n) C3k2_MHSA: " in (m := err([-1, 2, "C3k2_MHSA", [256, False, 0.25, {"heads": 4}]]))
    assert "heads=4 is invalid" in m and "width 16 inside C3k2" in m
    assert "Did you mean 'C3k2_CBAM'?" in err([-1, 2, "C3k2_CBMA", [256]], UnknownModuleError)


def test_base_args_the_ultralytics_block_cannot_take_are_row_errors():
    """SPPF's k=0 (torch: 'kernel size should be greater than zero') and C3k2's attn=8 (Ultralytics: truthy, so PSA
    attention is built) are refused before the build, naming the row, the arg, the value and what is allowed; the arg
    lists of Ultralytics' own YAMLs (yolov8, yolo11, yolo26) pass (test_yolov8_c2f_and_yolo26_attn_rows builds them)."""
    d = yaml_model_load("yolo11n.yaml")

    def err(i, row):
        dd = copy.deepcopy(d)
        dd["backbone"][i] = row
        with pytest.raises(AttnBuildError) as e:
            DetectionModel(dd, verbose=False)
        return str(e.value)

    assert err(9, [-1, 1, "SPPF_CBAM", [1024, 0]]) == (
        "row 9 (scale n) SPPF_CBAM: k=0 is invalid (SPPF's arg 2 of [c2, k, n, shortcut]); allowed: an odd int >= 1 "
        "(the max-pool kernel; Ultralytics' default 5)")
    assert "SPPF_CBAM: k=4 is invalid" in err(9, [-1, 1, "SPPF_CBAM", [1024, 4]])  # the pyramid would grow by 1 px
    assert err(6, [-1, 2, "C3k2_CBAM", [512, False, 0.25, 8]]) == (
        "row 6 (scale n) C3k2_CBAM: attn=8 is invalid (C3k2's arg 4 of [c2, c3k, e, attn, g, shortcut]); allowed: "
        "True or False (Ultralytics' own PSA attention after each block); CBAM's hyperparameters go in a trailing "
        "mapping, e.g. [512, False, 0.25, {r: 8}]")
    assert "C2f_SE: e=0 is invalid" in err(2, [-1, 2, "C2f_SE", [256, False, 1, 0]])
    assert "C2f_SE: g=0.5 is invalid" in err(2, [-1, 2, "C2f_SE", [256, False, 0.5]])
    fine = {"C3k2": [[512, True], [512, False, 0.25], [1024, True, 0.5, True], [256, "False", 0.25]],
            "C2f": [[512], [256, True]], "SPPF": [[1024, 5], [1024, 5, 3, True], [1024, 5, 3, False]]}
    for base, argss in fine.items():  # the arg lists of Ultralytics' own YAMLs
        for a in argss:
            csp.check_base_args("row", getattr(csp, f"{base}_SE"), a)


def test_modules_command_lists_the_derived_blocks(capsys):
    from attn_yolo.cli import modules_main

    assert modules_main([]) == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if "C3k2_<X>" in s)
    assert "C2f_<X>" in line and "SPPF_<X>" in line
    assert "[-1, 2, C3k2_CBAM, [256, False, 0.25, {r: 8}]]" in out
    assert len(out.splitlines()) < 3 * len(MODULES) + 12  # compact: one short section, not 36 entries


# ------------------------------------------------------------------------------------------------------- export


def calibrate(model: torch.nn.Module, size: int = 160) -> None:
    """BatchNorm statistics from the two bundled photos (cumulative average, train mode), weights untouched."""
    x = torch.cat([letterboxed(n, size, square=True) for n in ("bus.jpg", "zidane.jpg")])
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        model(x)
    for bn in bns:
        bn.momentum = 0.03
    model.eval()


def letterboxed(name: str, size: int = 320, square: bool = False) -> torch.Tensor:
    img = LetterBox((size, size), auto=not square, stride=32)(image=cv2.imread(str(ASSETS / name)))
    return torch.from_numpy(np.ascontiguousarray(img[..., ::-1].transpose(2, 0, 1))).float()[None] / 255


TINY = {  # strides 8/16/32, one of each derived kind: C3k2_<X> at P3, C2f_<X> at P4, SPPF_<X> at P5
    "nc": 2,
    "backbone": [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "Conv", [32, 3, 2]], [-1, 1, "Conv", [32, 3, 2]],
                 [-1, 1, "C3k2_{x}", [32, False, 0.5]], [-1, 1, "Conv", [64, 3, 2]], [-1, 1, "C2f_{x}", [64, True]],
                 [-1, 1, "Conv", [64, 3, 2]], [-1, 1, "SPPF_{x}", [64, 5]]],
    "head": [[[3, 5, 7], 1, "Detect", ["nc"]]],
}  # fmt: skip


EXPORT_FAST = ["CBAM", "MHSA", "EMA", "CoordAtt"]


@pytest.mark.parametrize("x", [x if x in EXPORT_FAST else pytest.param(x, marks=pytest.mark.slow) for x in MODULES])
def test_export_static_and_dynamic_verify(tmp_path, x):
    """Static at 96×160 and dynamic at 128, verified under onnxruntime against PyTorch (``verify_onnx``): a
    representative subset by default (channel+spatial, SDPA, grouped, directional pools), every block with -m slow."""
    pytest.importorskip("onnxruntime")
    from attn_yolo import export as E

    d = yaml.safe_load(yaml.safe_dump(TINY).replace("{x}", x))
    (tmp_path / f"tiny-{x}.yaml").write_text(yaml.safe_dump(d))
    torch.manual_seed(0)
    y = YOLO(str(tmp_path / f"tiny-{x}.yaml"))
    calibrate(y.model)
    y.save(str(tmp_path / f"tiny-{x}.pt"))
    pt = str(tmp_path / f"tiny-{x}.pt")
    assert [row[0] for row in E.block_min_opsets(load_model(pt, "model", ValueError))] == [x] * 3
    for kw in ({"imgsz": (96, 160), "out": tmp_path / "s.onnx"}, {"imgsz": 128, "dynamic": True,
                                                                   "out": tmp_path / "d.onnx"}):
        f = E.export_onnx(pt, simplify=False, **kw)
        r = E.verify_onnx(f, pt)
        assert r.passed, r.summary()
        assert r.dynamic == bool(kw.get("dynamic")) and any(c.name == "raw" for c in r.checks)


# ------------------------------------------------------------------------------------------- into a trained model


@pytest.fixture(scope="module")
def base_pt(tmp_path_factory) -> str:
    """yolo11n with random weights and BatchNorm statistics calibrated on the two bundled photos, saved by
    Ultralytics (``YOLO.save``, FP16): a stand-in for a trained checkpoint whose outputs depend on its input."""
    torch.manual_seed(1)
    y = YOLO("yolo11n.yaml")
    calibrate(y.model, 256)
    path = tmp_path_factory.mktemp("base") / "yolo11n.pt"
    y.save(str(path))
    return str(path)


def outputs(model, x) -> list[torch.Tensor]:
    with torch.no_grad():
        return tensors(model.eval()(x))


def test_insert_inside_a_trained_yolo11n_carries_every_tensor_and_predicts_as_it(base_pt, tmp_path, monkeypatch,
                                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["base=yolo11n.yaml", "module=C3k2_CBAM", "at=backbone", f"pretrained={base_pt}"]) == 0
    out = capsys.readouterr().out
    assert "C3k2_CBAM [r=16, k=7, init_values=0.0] in place of the C3k2 of base layer 2 (P2/4) -> layer 2" in out
    assert "transferred 499/499 tensors from base" in out and "identity at init" in out
    d = yaml.safe_load((tmp_path / "yolo11n-c3k2_cbam.yaml").read_text())
    assert [r[2] for r in rows(d)].count("C3k2_CBAM") == 4 and rows(d)[2][3] == [256, False, 0.25,
                                                                                 {"init_values": 0.0}]
    src = load_model(base_pt, "base", ValueError)
    new = load_model(str(tmp_path / "yolo11n-c3k2_cbam.pt"), "model", ValueError)  # weights-only (SAFE_GLOBALS)
    sd, new_sd = src.state_dict(), new.state_dict()
    assert all(torch.equal(new_sd[k], v) for k, v in sd.items())  # 100 %: same keys, same values
    assert {k.split(".attn.")[0] for k in set(new_sd) - set(sd)} == {
        f"model.{i}.m.{j}" for i in (2, 4) for j in (0,)} | {f"model.{i}.m.0.m.{j}" for i in (6, 8) for j in (0, 1)}
    for img in ("bus.jpg", "zidane.jpg"):
        x = letterboxed(img)
        ref, got = outputs(src, x), outputs(new, x)
        assert max((a - b).abs().max().item() for a, b in zip(ref, got)) <= 1e-6
    plain = transfer(base_pt, insert_dict("yolo11n.yaml", "C3k2_CBAM", "backbone", check=False), identity=False,
                     verbose=False)
    assert not plain.identity and plain.replaced == [2, 4, 6, 8]
    assert max((a - b).abs().max().item() for a, b in zip(outputs(src, x), outputs(plain.model, x))) > 1e-3


def test_transfer_into_a_fresh_yolo_and_several_sites(base_pt, tmp_path):
    """The path the ablation's arms take (a YOLO built from the YAML, weights carried by ``transfer``), with a
    standalone block inserted next to it: every tensor lands, identity at init."""
    out = tmp_path / "yolo11n-c2f.yaml"
    d = insert_dict("yolo11n.yaml", ["C3k2_ECA", "SE", "SPPF_SimAM"], ["neck", "backbone", "sppf"], check=False)
    yaml.safe_dump(d, out.open("w"), sort_keys=False)
    y = YOLO(str(out))
    report = transfer(base_pt, y, verbose=False)
    assert report.transferred == report.total == 499 and report.identity
    assert report.replaced == [11, 16, 19, 22, 25] and report.inserted == [5, 8, 13]  # SPPF 9 -> 11
    x = letterboxed("bus.jpg", 256)
    got, ref = outputs(y.model, x), outputs(load_model(base_pt, "base", ValueError), x)
    assert max((a - b).abs().max().item() for a, b in zip(ref, got)) <= 1e-6
    assert "attention inside layers 11: SPPF_SimAM, 16: C3k2_ECA" in str(report)


def test_insert_errors():
    with pytest.raises(InsertionError, match="its CSP blocks are C2f: use module=C2f_CBAM"):
        insert_dict("yolov8n.yaml", "C3k2_CBAM", "backbone", check=False)
    with pytest.raises(InsertionError, match="layer 5 is Conv, not C3k2; C3k2_SE replaces C3k2 rows: 2, 4, 6, 8, 13"):
        insert_dict("yolo11n.yaml", "C3k2_SE", "5", check=False)
    with pytest.raises(InsertionError, match="'sppf' is not a site for C3k2_SE; allowed: backbone, neck or C3k2"):
        insert_dict("yolo11n.yaml", "C3k2_SE", "sppf", check=False)
    with pytest.raises(InsertionError, match="base layer 2 is replaced twice"):
        insert_dict("yolo11n.yaml", ["C3k2_SE", "C3k2_ECA"], "2", check=False)


def test_ablation_insert_spec_accepts_a_derived_block():
    from attn_yolo.ablate.config.variants import check_variants

    raw = [{"name": "base", "model": "yolo11n.yaml"},
           {"name": "inside", "base": "yolo11n.yaml", "module": "C3k2_CBAM", "at": "backbone", "args": [8]}]
    variants, baseline, problems = check_variants(raw, Path("."), pretrained=yaml_model_load("yolo11n.yaml"))
    assert not problems and baseline == "base" and [v.name for v in variants] == ["base", "inside"]
    assert rows(variants[1].model_dict)[2] == [-1, 2, "C3k2_CBAM", [256, False, 0.25, {"r": 8}]]
    model = DetectionModel(copy.deepcopy(variants[1].model_dict), nc=2, verbose=False)  # as the run's prepare builds
    assert all(b.attn.r == 8 for b in model.modules() if isinstance(b, csp.AttnBottleneck))


def test_weights_only_reload_in_a_fresh_process(base_pt, tmp_path):
    """``ULTRALYTICS_SAFE_LOAD=1`` (torch weights_only): after ``import attn_yolo`` the derived classes are
    allow-listed, and the reloaded model predicts as the base."""
    d = insert_dict("yolo11n.yaml", "C3k2_GAM", "backbone,neck", check=False)
    report = transfer(base_pt, d, verbose=False)
    ckpt = tmp_path / "inside.pt"
    from attn_yolo.checkpoint import save_checkpoint

    save_checkpoint(report.model, ckpt)
    code = (
        "import torch, attn_yolo\nfrom ultralytics import YOLO\n"
        f"a, b = YOLO({base_pt!r}).model.float().eval(), YOLO({str(ckpt)!r}).model.float().eval()\n"
        "x = torch.rand(1, 3, 128, 96)\n"
        "with torch.no_grad():\n    print(type(b.model[13]).__module__, (a(x)[0] - b(x)[0]).abs().max().item())\n"
    )
    env = {**os.environ, "YOLO_OFFLINE": "1", "ULTRALYTICS_SAFE_LOAD": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    module, diff = r.stdout.split()[-2:]
    assert module == "attn_yolo.csp" and float(diff) <= 1e-6
    assert csp.C3k2_GAM in torch.serialization.get_safe_globals() and csp.AttnBottleneck in (
        torch.serialization.get_safe_globals())
    assert attn_yolo.registry.SAFE_GLOBALS  # the list register() passes to add_safe_globals
