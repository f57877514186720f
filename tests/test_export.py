"""ONNX export and its verification against PyTorch (attn_yolo.export).

Models are random (no downloads). In a randomly initialised detector activations shrink layer by layer (yolo11n-se:
std 1e-10 at P5), so its outputs hardly depend on the input, and its class scores sit at the bias init (about 1e-3),
below any threshold. ``informative`` fixes both without training: each BatchNorm is scaled to unit output std on the
test photos (one scalar per layer, as LSUV init, Mishkin & Matas 2016, so the network stays well conditioned), then
the last class conv of each Detect level so scores spread over (0, 1) and NMS keeps boxes. That makes the raw and NMS
checks sensitive (``identity_block`` shows it).
"""

from __future__ import annotations

import json
import os
import shutil
import time

import numpy as np
import pytest
import torch
import yaml
from ultralytics import YOLO

import attn_yolo
import attn_yolo_console as cli
from attn_yolo import export as E
from attn_yolo.export import checks as C
from attn_yolo.export import verify as V
from attn_yolo.images import default_sources

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from attn_yolo.export.matrix import BLOCK_ARGS, tiny_yaml  # noqa: E402  (each block's args on a 32-channel P3)
from attn_yolo.export.matrix import calibrate as informative  # noqa: E402

MEAN, MEAN_MAX = {"ReduceMean"}, {"ReduceMean", "ReduceMax"}
REDUCTIONS = {"SE": MEAN, "ECA": MEAN, "SAM": MEAN_MAX, "CBAM": MEAN_MAX, "MHSA": set(), "CoordAtt": MEAN, "EMA": MEAN,
              "SimAM": MEAN, "GAM": set(), "ShuffleAttention": MEAN, "TripletAttention": MEAN_MAX, "NAM": set(),
              "LSKA": set(), "MLCA": {"MatMul", "ReduceMean"}, "ELA": MEAN, "CAA": set(),
              "SKAttention": MEAN, "BiLevelRoutingAttention": {"TopK", "Gather"}}
"""The pooling each block must export as (reductions over an axis: any input size), never as a sized pool."""
LOCAL_POOLS: dict[str, set[str]] = {"CAA": {"AveragePool"}}
"""Fixed-window local pools a block may export as by design (size-independent, so allowed): CAA's 7×7 mean, stride 1
(PKINet's ``AvgPool2d(7, 1, 3)``)."""
MODELS = os.path.join(os.path.dirname(__file__), os.pardir, "models")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch (and so onnxruntime) thread: on shared cores OpenMP spin-waits make 2 threads up to 10x slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def save_model(yolo, path) -> str:
    yolo.save(str(path))
    assert YOLO(str(path)).model.yaml == yolo.model.yaml  # the checkpoint reloads
    return str(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """block name → path of a tiny random checkpoint made ``informative`` (built once per module)."""
    cache = {}

    def make(block: str) -> str:
        if block not in cache:
            d = tmp_path_factory.mktemp(f"tiny-{block}")
            (d / f"tiny-{block}.yaml").write_text(yaml.safe_dump(tiny_yaml(block)))
            torch.manual_seed(0)
            y = YOLO(str(d / f"tiny-{block}.yaml"))
            informative(y, 128)
            cache[block] = save_model(y, d / f"tiny-{block}.pt")
        return cache[block]

    return make


def ops(path) -> set[str]:
    return {n.op_type for n in onnx.load(str(path)).graph.node}


def nms_boxes(report) -> int:
    return sum(c.detail["matched"] for c in report.checks if c.name == "nms")


def identity_block(model: torch.nn.Module, cls: type) -> None:
    """Make every ``cls`` block in ``model`` the identity (to show the checks see the block)."""
    for m in model.modules():
        if type(m) is cls:
            m.forward = lambda x: x


# ----------------------------------------------------------------------------------------------------------- opsets
def test_min_opset_table_covers_every_block():
    assert set(E.MIN_OPSET) == set(attn_yolo.MODULES.values())
    assert E.MIN_OPSET[attn_yolo.MHSA][0] == 14
    assert E.default_opset() >= 14  # the default export takes every block


@pytest.mark.parametrize("block", list(BLOCK_ARGS))
def test_block_static_at_min_opset(tiny, block):
    """Static export at a rectangular size (not 640) at the block's minimum opset verifies; the checks see the block."""
    cls = attn_yolo.MODULES[block]
    opset = E.MIN_OPSET[cls][0]
    f = E.export_onnx(tiny(block), imgsz=(96, 160), opset=opset, simplify=False, overwrite=True)
    r = E.verify_onnx(f, tiny(block))
    assert r.passed, r.summary()
    assert (r.opset, r.dynamic, r.precision, r.export_imgsz) == (opset, False, "fp32", [96, 160])
    assert [c.case for c in r.checks if c.name == "raw"] == ["b1 96x160 (2 images)"]
    assert nms_boxes(r) > 0, r.summary()
    assert not ops(f) & ({"AveragePool", "MaxPool"} - LOCAL_POOLS.get(block, set()))  # global pools: reductions
    assert REDUCTIONS[block] <= ops(f)

    y = YOLO(tiny(block))
    identity_block(y.model, cls)  # the same file against a model without the block must fail
    bad = E.verify_onnx(f, y)
    assert not bad.passed and any(c.name == "raw" for c in bad.failures)


@pytest.mark.parametrize("block", list(BLOCK_ARGS))
def test_block_dynamic_other_sizes(tiny, block):
    """Dynamic export at 128 (onnxslim on) verifies at batch 1 and 3, 160x160 and the rectangular 96x160."""
    f = E.export_onnx(tiny(block), imgsz=128, dynamic=True, overwrite=True)
    r = E.verify_onnx(f, tiny(block))
    assert r.passed, r.summary()
    assert r.dynamic and r.opset == E.default_opset()
    cases = [c.case for c in r.checks if c.name == "raw"]
    assert cases == [
        "b1 128x128 (2 images)", "b3 128x128", "b1 160x160 (2 images)", "b1 96x160 (2 images)", "b3 96x160"]
    for c in r.checks:
        if c.name == "raw":
            assert c.value <= 1e-4 and c.detail["shape"][0] in (2, 3)
    assert nms_boxes(r) > 0, r.summary()
    assert json.loads(r.save(overwrite=True).read_text())["passed"] is True
    assert not ops(f) & ({"AveragePool", "MaxPool"} - LOCAL_POOLS.get(block, set()))


@pytest.mark.parametrize("variant", ["se", "eca", "sam", "cbam", "mhsa"])
def test_yolo11n_variant_dynamic(tmp_path, monkeypatch, variant):
    """A whole yolo11n with each block exports dynamic at 160 and verifies at 160, batch 3, 192 and 128x192."""
    monkeypatch.chdir(tmp_path)  # a model built from a YAML exports into the working directory
    torch.manual_seed(0)
    y = YOLO(os.path.join(MODELS, f"yolo11n-{variant}.yaml"))
    informative(y, 160)
    f = E.export_onnx(y, imgsz=160, dynamic=True, simplify=False)
    assert f.resolve() == tmp_path / f"yolo11n-{variant}.onnx"
    r = E.verify_onnx(f, y, source=default_sources()[0])
    assert r.passed, r.summary()
    assert [c.case for c in r.checks if c.name == "raw"] == [
        "b1 160x160 (1 images)", "b3 160x160", "b1 192x192 (1 images)", "b1 128x192 (1 images)", "b3 128x192"]
    assert nms_boxes(r) > 0, r.summary()


def test_mhsa_export_not_frozen_to_the_traced_token_count(tmp_path):
    """An MHSA exported at one token count runs at others: nothing in the graph is frozen to the traced size."""
    import onnxruntime as ort

    torch.manual_seed(0)
    m = attn_yolo.MHSA(32, heads=2).eval()
    f = tmp_path / "mhsa.onnx"
    with torch.no_grad():
        torch.onnx.export(m, torch.randn(1, 32, 3, 4), f, dynamo=False, opset_version=18, input_names=["x"],
                          dynamic_axes={"x": {0: "b", 2: "h", 3: "w"}})
        x = torch.randn(2, 32, 6, 7)
        ref = m(x).numpy()
    out = ort.InferenceSession(str(f), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    assert np.abs(out - ref).max() < 1e-4


def test_opset_too_old_names_block_and_minimum(tiny, tmp_path, capsys):
    pt = shutil.copy(tiny("MHSA"), tmp_path / "mhsa.pt")
    with pytest.raises(E.OpsetError, match=r"opset=13 is too old.*MHSA \(layer 3\) needs opset >= 14.*opset>=14"):
        E.export_onnx(pt, imgsz=128, opset=13)
    assert not list(tmp_path.glob("*.onnx"))  # refused before exporting
    assert cli.main(["export", f"model={pt}", "imgsz=128", "opset=13"]) == 2
    assert "MHSA (layer 3) needs opset >= 14" in capsys.readouterr().err
    E.check_opset(YOLO(tiny("SE")).model, 9)  # pooling blocks: Ultralytics' own minimum
    with pytest.raises(E.OpsetError, match="needs opset >= 9"):
        E.check_opset(YOLO(tiny("SE")).model, 8)


def test_torch_exporter_needs_opset_14_for_sdpa(tiny):
    """Why MIN_OPSET[MHSA] is 14: Ultralytics' exporter itself fails at 13 on scaled_dot_product_attention."""
    with pytest.raises(Exception, match=r"scaled_dot_product_attention.*opset version 13.*added in version 14"):
        YOLO(tiny("MHSA")).export(format="onnx", imgsz=128, opset=13, simplify=False)


# ----------------------------------------------------------------------------------------------------------- failure
def test_cli_export_then_perturbed_file_fails(tiny, tmp_path, capsys):
    pt = tiny("CBAM")
    assert cli.main(["export", f"model={pt}", "imgsz=128", "simplify=False", "overwrite=True"]) == 0
    f = pt.replace(".pt", ".onnx")
    out = capsys.readouterr().out
    assert "PASSED" in out and "Tolerance: raw 1e-04" in out
    good = json.loads(open(f.replace(".onnx", ".verify.json")).read())
    assert good["passed"] and good["tolerance"]["raw_rel"] == 1e-4 and good["tolerance"]["iou_min"] == 0.99

    m = onnx.load(f)  # noise on the class conv of the P3 level
    t = next(t for t in m.graph.initializer if t.name == "model.6.cv3.0.2.weight")
    a = numpy_helper.to_array(t)
    a = a + np.random.default_rng(0).normal(0, 0.1 * a.std(), a.shape).astype(a.dtype)
    t.CopyFrom(numpy_helper.from_array(a, t.name))
    bad = tmp_path / "perturbed.onnx"
    onnx.save(m, str(bad))

    assert cli.main(["export", f"model={pt}", f"onnx={bad}"]) == 1
    out = capsys.readouterr().out
    assert "  FAIL     raw" in out and "Failed: raw b1 128x128 (2 images): rel diff" in out and "> 1e-04" in out
    assert "Verification FAILED; the exported file is kept" in out and bad.exists()
    rep = json.loads((tmp_path / "perturbed.verify.json").read_text())
    raw = next(c for c in rep["checks"] if c["name"] == "raw")
    assert rep["passed"] is False and not raw["passed"] and raw["value"] > 1e-4
    assert raw["detail"]["scores"]["max_abs"] > 0 and raw["detail"]["scores"]["rel"] == raw["value"]


def test_onnx_that_fails_checker_is_reported(tiny, tmp_path):
    f = E.export_onnx(tiny("SE"), imgsz=128, simplify=False, overwrite=True)
    m = onnx.load(str(f))
    m.graph.node.insert(0, m.graph.node.pop())  # break topological order
    bad = tmp_path / "unsorted.onnx"
    onnx.save(m, str(bad))
    r = E.verify_onnx(bad, tiny("SE"))
    assert not r.passed and r.failures[0].name == "onnx.checker" and "topologically" in r.failures[0].detail["message"]
    assert E.toposort_onnx(bad) and not E.toposort_onnx(bad)
    assert E.verify_onnx(bad, tiny("SE")).passed


# -------------------------------------------------------------------------------------------------------------- half
def test_half_on_cpu(tiny):
    """half=True on CPU: Ultralytics converts to fp16 with fp32 I/O; the file passes onnx.checker and the fp16 limit."""
    f = E.export_onnx(tiny("MHSA"), imgsz=128, half=True, dynamic=True, simplify=False, overwrite=True)
    m = onnx.load(str(f))
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in m.graph.initializer)
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    r = E.verify_onnx(f, tiny("MHSA"), sizes=[(96, 160)])
    assert r.precision == "fp16" and r.tolerance["raw_rel"] == E.TOLERANCE["fp16"] == 1e-2
    assert r.passed, r.summary()
    assert max(c.value for c in r.checks if c.name == "raw") > 1e-5  # really fp16, not fp32


# ------------------------------------------------------------------------------------------------------------- units
def test_compare_detections_synthetic():
    """Match logic on hand-made raw outputs: 1 image, 2 classes, 4 anchors, non-overlapping boxes."""
    boxes = np.array([[10, 10, 8, 8], [50, 10, 8, 8], [90, 60, 20, 20], [50, 50, 20, 20]], np.float32)  # xywh
    scores = np.array([[0.9, 0.1], [0.1, 0.8], [0.05, 0.6], [0.3, 0.2]], np.float32)
    raw = np.concatenate([boxes.T, scores.T])[None]  # (1, 6, 4)
    same = C.compare_detections(raw, raw.copy(), 0.25, 0.7, 0.0)
    assert same.passed and same.detail["matched"] == 4 and same.value == 1.0

    moved = raw.copy()
    moved[0, 0, 1] += 2.0  # anchor 1 shifted 2 px: IoU 48 / 80 = 0.6
    c = C.compare_detections(raw, moved, 0.25, 0.7, 0.0)
    assert not c.passed and (c.detail["unmatched_torch"], c.detail["unmatched_export"]) == (1, 1)
    assert c.value == pytest.approx(0.6, abs=1e-6)

    relabel = raw.copy()
    relabel[0, 4:, 2] = [0.6, 0.05]  # anchor 2 changes class
    assert not C.compare_detections(raw, relabel, 0.25, 0.7, 0.0).passed

    ref, out = raw.copy(), raw.copy()
    ref[0, 4, 3], out[0, 4, 3] = 0.26, 0.24  # anchor 3 drops below conf in the onnx output
    assert not C.compare_detections(ref, out, 0.25, 0.7, 0.0).passed  # a real difference ...
    b = C.compare_detections(ref, out, 0.25, 0.7, 0.02)  # ... unless the allowed score margin covers it
    assert b.passed and b.detail["borderline"] == 1

    ref, out = raw.copy(), raw.copy()  # anchors 2, 3: class 0, overlapping (IoU 0.86), scores 1e-3 apart, swapped
    for r in (ref, out):
        r[0, :4, 3] = [91.5, 60, 20, 20]
    ref[0, 4:, 2], ref[0, 4:, 3] = [0.6, 0.05], [0.601, 0.05]
    out[0, 4:, 2], out[0, 4:, 3] = [0.601, 0.05], [0.6, 0.05]
    assert not C.compare_detections(ref, out, 0.25, 0.7, 0.0).passed  # NMS keeps different boxes
    t = C.compare_detections(ref, out, 0.25, 0.7, 1e-3)  # a 1e-3 score difference may swap them: excused
    assert t.passed and t.detail["tie"] == 2 and t.detail["matched"] == 2, t.detail


def test_other_sizes_and_letterbox():
    assert V.other_sizes((640, 640)) == [(800, 800), (480, 800)]
    assert V.other_sizes((128, 128)) == [(160, 160), (96, 160)]
    x = V.letterbox_batch([im for _, im in V.load_images()], (96, 160))
    assert x.shape == (2, 3, 96, 160) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1


def test_onnx_info_and_latency(tiny, monkeypatch):
    torch.set_num_threads(2)
    try:
        f = E.export_onnx(tiny("ECA"), imgsz=(96, 128), simplify=False, overwrite=True)
        assert torch.get_num_threads() == 2  # restored after Ultralytics' select_device reset it
    finally:
        torch.set_num_threads(1)
    info = E.onnx_info(f)
    assert info == {"opset": E.default_opset(), "dynamic": False, "precision": "fp32", "imgsz": [96, 128], "stride": 32}
    from attn_yolo.export import runtime

    seen = {}

    def timed(rt, x, repeats, warmup):  # what onnx_latency_ms times: this file in onnxruntime, on a (1, 3, h, w) input
        seen.update(x=x, repeats=repeats, warmup=warmup, out=rt.run(x))
        return 12.5

    monkeypatch.setattr(runtime, "latency_ms", timed)
    assert E.onnx_latency_ms(f, (96, 128), repeats=3, warmup=1) == 12.5
    x = seen["x"]
    assert x.shape == (1, 3, 96, 128) and x.dtype == np.float32 and 0 <= x.min() and x.max() < 1
    assert (seen["repeats"], seen["warmup"]) == (3, 1)
    import onnxruntime as ort

    sess = ort.InferenceSession(str(f), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"images": x})[0]  # "images": the input name Ultralytics' exporter gives
    np.testing.assert_allclose(seen["out"], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="static input shape"):
        E.onnx_latency_ms(f, 128, repeats=1)


def test_latency_is_the_median_of_the_timed_runs_after_warmup():
    """latency_ms on a runtime with known run times (sleeps): the median of the timed runs, in ms; warm-up runs (slow
    here) are run and not timed."""
    from attn_yolo.export.runtime import latency_ms

    class Sleeper:
        calls = 0

        def run(self, x):
            seconds = [0.3, 0.3, 0.01, 1.0, 0.03, 0.15, 0.05][self.calls]  # 2 warm-up runs, then 5 timed
            self.calls += 1
            time.sleep(seconds)

    rt = Sleeper()
    ms = latency_ms(rt, np.zeros(1), repeats=5, warmup=2)
    assert rt.calls == 7
    assert 50 <= ms < 140  # the median, 50 ms (sleep overshoots under load); mean 248, with warm-ups timed 150
    with pytest.raises(ValueError, match="repeats=0"):
        latency_ms(rt, np.zeros(1), repeats=0)


def test_toposort_onnx_unit(tmp_path):
    a = helper.make_node("Relu", ["x"], ["y"])
    b = helper.make_node("Neg", ["y"], ["z"])
    vi = lambda n: helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2])  # noqa: E731
    g = helper.make_graph([b, a], "g", [vi("x")], [vi("z")])
    p = tmp_path / "g.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(p))
    with pytest.raises(onnx.checker.ValidationError, match="topologically"):
        onnx.checker.check_model(str(p))
    assert E.toposort_onnx(p)
    onnx.checker.check_model(str(p))
    assert [n.op_type for n in onnx.load(str(p)).graph.node] == ["Relu", "Neg"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["imgsz=128"], "model= is required"),
        (["model=x.pt", "format=tflite"], "format='tflite' is not verified here; allowed: onnx, openvino, engine"),
        (["model=x.pt", "format=onnxx"], "format='onnxx': unknown format. Did you mean 'onnx'? Verified here: onnx, "
                                         "openvino, engine; Ultralytics' exporter also takes torchscript, "),
        (["model=x.pt", "format=foo"], "format='foo': unknown format. Verified here: onnx"),
        (["model=x.pt", "imgsz=abc"], "imgsz: 'abc'; expected"),
        (["model=x.pt", "dynamic=maybe"], "dynamic: 'maybe'; expected"),
        (["model=x.pt", "conf=2"], "conf: 2; expected"),
        (["model=x.pt", "source=/nonexistent.jpg"], "no such file"),
        (["model=x.pt", "opsett=13"], "opsett: unknown key (did you mean 'opset'?)"),
    ],
)
def test_cli_usage_errors(args, message, capsys):
    assert cli.main(["export", *args]) == 2
    assert message in capsys.readouterr().err


def test_cli_help(capsys):
    assert cli.main(["export", "help"]) == 0
    assert "attn-yolo export model=best.pt format=onnx" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ not run, no overwrite
def test_check_that_compared_nothing_is_not_run_not_passed(tmp_path, capsys):
    """An untrained model scores no box above conf: its nms checks are reported as not run, apart from the passes."""
    (tmp_path / "raw.yaml").write_text(yaml.safe_dump(tiny_yaml("SE")))
    torch.manual_seed(0)
    pt = save_model(YOLO(str(tmp_path / "raw.yaml")), tmp_path / "raw.pt")  # untrained: scores at the bias init
    assert cli.main(["export", f"model={pt}", "imgsz=64", "simplify=False"]) == 0
    out = capsys.readouterr().out
    rep = json.loads((tmp_path / "raw.verify.json").read_text())
    nms = [c for c in rep["checks"] if c["name"] == "nms"]
    assert nms and all(not c["passed"] and c["not_run"] for c in nms)
    assert rep["passed"] and rep["checks_not_run"] == len(nms) and rep["checks_run"] == len(rep["checks"]) - len(nms)
    x = V.letterbox_batch([im for _, im in V.load_images()], (64, 64))
    top = float(V.torch_raw(YOLO(pt).model, x)[:, 4:].max())  # the highest class score, computed here
    assert max(c["detail"]["max_score"] for c in nms) == pytest.approx(top, rel=1e-4) and top < 0.25
    n = rep["checks_run"]
    assert f"PASSED: {n}/{n} checks, {len(nms)} not run: no detections above conf=0.25 to compare" in out
    hint = f"no box scores above conf=0.25 in the torch or the onnx output (highest class score {top:.3g}), so there"
    assert "  NOT RUN  nms" in out and hint in out and f"pass a conf= below {top:.3g}\n" in out  # complete
    low = E.verify_onnx(tmp_path / "raw.onnx", pt, conf=top / 2)  # below it, the detections are compared
    assert not low.not_run and nms_boxes(low) > 0 and low.passed, low.summary()


def test_second_export_needs_another_name_or_overwrite(tiny, tmp_path, capsys):
    """A dynamic export does not silently replace a static best.onnx nor its report."""
    pt = shutil.copy(tiny("SE"), tmp_path / "best.pt")
    static, dynamic = tmp_path / "best.onnx", tmp_path / "best-dynamic.onnx"
    assert cli.main(["export", f"model={pt}", "imgsz=64", "simplify=False", "verify=False"]) == 0
    first = static.read_bytes()
    assert cli.main(["export", f"model={pt}", "imgsz=64", "dynamic=True"]) == 2
    err = capsys.readouterr().err
    assert f"the ONNX file '{static}' exists; pass overwrite=True to replace it, or out= another name to keep both " \
           "(e.g. out=best-dynamic.onnx)" in err
    assert static.read_bytes() == first and not dynamic.exists()
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        E.export_onnx(pt, imgsz=64, dynamic=True)
    assert cli.main(["export", f"model={pt}", "imgsz=64", "dynamic=True", f"out={dynamic}", "simplify=False"]) == 0
    assert E.onnx_info(dynamic)["dynamic"] and not E.onnx_info(static)["dynamic"] and static.read_bytes() == first
    assert json.loads(E.report_path(dynamic).read_text())["dynamic"] is True
    capsys.readouterr()
    assert cli.main(["export", f"model={pt}", f"onnx={dynamic}"]) == 2  # re-verifying: the report exists
    assert f"the report '{E.report_path(dynamic)}' exists; pass overwrite=True" in capsys.readouterr().err
    assert cli.main(["export", f"model={pt}", "imgsz=64", "dynamic=True", "overwrite=True", "verify=False"]) == 0
    assert E.onnx_info(static)["dynamic"]  # replaced, as asked
    with pytest.raises(FileExistsError):
        E.VerifyReport(str(dynamic), "m", 18, True, "fp32", [64, 64], [], {}).save()


def test_nms_check_that_matched_nothing_is_not_run():
    """Detections on both sides, none matched, all excused as near ties (the class may flip): nothing was verified, so
    the check is NOT RUN, never a pass."""
    ref = np.array([[[64.0], [64.0], [20.0], [20.0], [0.6000000], [0.6000004]]], dtype=np.float32)  # class 1 wins
    out = np.array([[[64.0], [64.0], [20.0], [20.0], [0.6000004], [0.6000000]]], dtype=np.float32)  # class 0 wins
    c = C.compare_detections(ref, out, conf=0.25, iou=0.7, margin=1e-5)
    assert (c.detail["n_torch"], c.detail["n_export"], c.detail["matched"], c.detail["tie"]) == (1, 1, 0, 2)
    assert c.status == "NOT RUN" and not c.passed and "nothing was verified" in c.not_run
    same = C.compare_detections(ref, ref, conf=0.25, iou=0.7, margin=1e-5)
    assert same.passed and same.detail["matched"] == 1  # a real match still passes
