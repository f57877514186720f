"""OpenVINO export verified on OpenVINO's CPU plugin, a broken IR caught, TensorRT refused without CUDA, and the export
matrix (a few cells here; all of them under ``slow``, checked against BENCHMARKS.md).

The model holds every block in a row at P3 of a tiny detector (imgsz 64-96), calibrated so its scores spread over
(0, 1) and the NMS check compares real detections (``attn_yolo.export.matrix.calibrate``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from ultralytics import YOLO

import attn_yolo_console as cli
from attn_yolo import export as E
from attn_yolo.export import matrix as M
from attn_yolo.export.verify import other_sizes
from attn_yolo.registry import MODULES

pytest.importorskip("openvino")
pytest.importorskip("onnxruntime")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def every_block(tmp_path_factory) -> str:
    """A calibrated tiny detector with every block of ``MODULES`` in a row at P3 (32 channels), saved as a .pt.

    A 1x1 Conv (with its BatchNorm) precedes each block, so calibration gives every block a unit-std input: without
    it the signal shrinks block by block (std 2e-5 by SKAttention), the BatchNorms inside the late blocks are scaled
    up past 65504 to compensate, and the checkpoint (saved fp16 by Ultralytics) holds inf weights."""
    d = tmp_path_factory.mktemp("every-block")
    assert set(M.BLOCK_ARGS) == set(MODULES)
    rows = [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "Conv", [32, 3, 2]], [-1, 1, "Conv", [32, 3, 2]]]
    rows += [row for b, a in M.BLOCK_ARGS.items() for row in ([-1, 1, "Conv", [32, 1, 1]], [-1, 1, b, a])]
    rows += [[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "Conv", [64, 3, 2]]]
    n = len(rows)
    (d / "every.yaml").write_text(yaml.safe_dump({"nc": 2, "backbone": rows,
                                                  "head": [[[n - 3, n - 2, n - 1], 1, "Detect", ["nc"]]]}))
    torch.manual_seed(0)
    y = YOLO(str(d / "every.yaml"))
    M.calibrate(y, 96, boxes=40)  # enough scores above 0.25 that every verified size has detections
    y.save(str(d / "every.pt"))
    found = {type(m).__name__ for m in YOLO(str(d / "every.pt")).model.modules()}
    assert set(MODULES) <= found
    return str(d / "every.pt")


def raw_cases(rep: dict) -> list[str]:
    return [c["case"] for c in rep["checks"] if c["name"] == "raw"]


def matched(rep: dict) -> int:
    return sum(c["detail"]["matched"] for c in rep["checks"] if c["name"] == "nms")


# ------------------------------------------------------------------------------------------------------ verification
def test_every_block_static_and_dynamic_fp32_pass(every_block, capsys):
    """Every block: static at 96x160 and dynamic at 96 (batch 3, 128x128, 64x128) verify on OpenVINO in f32."""
    d = Path(every_block).parent
    assert cli.main(["export", f"model={every_block}", "format=openvino", "imgsz=96,160"]) == 0
    out = capsys.readouterr().out
    xml = d / "every_openvino_model" / "every.xml"
    assert f"OpenVINO verification: {xml} against {every_block}" in out and "PASSED" in out
    assert "  PASS     openvino.load" in out and "inference precision f32 (asked f32)" in out
    rep = json.loads((d / "every_openvino_model" / "every.verify.json").read_text())
    assert rep["passed"] and (rep["format"], rep["opset"], rep["dynamic"], rep["precision"]) == (
        "openvino", None, False, "fp32")
    assert raw_cases(rep) == ["b1 96x160 (2 images)"] and matched(rep) > 0
    assert all(c["value"] <= 1e-4 for c in rep["checks"] if c["name"] == "raw")

    dyn = d / "every-dynamic_openvino_model"
    assert cli.main(["export", f"model={every_block}", "format=openvino", "imgsz=96", "dynamic=True",
                     f"out={dyn}"]) == 0
    rep = json.loads((dyn / "every-dynamic.verify.json").read_text())
    assert rep["passed"] and rep["dynamic"] and rep["precision"] == "fp32", capsys.readouterr().out
    assert raw_cases(rep) == ["b1 96x96 (2 images)", "b3 96x96", "b1 128x128 (2 images)", "b1 64x128 (2 images)",
                              "b3 64x128"]
    assert matched(rep) > 0 and rep["checks_not_run"] == 0


def test_every_block_fp16_within_its_tolerance(every_block, tmp_path):
    """half=True: fp16 weights in the IR (read from the IR itself), run in f32 arithmetic (the CPU plugin would pick
    bf16 or f16 by CPU), verified within 1e-2, and really not fp32."""
    f = E.export_openvino(every_block, 96, dynamic=True, half=True, out=tmp_path / "every-fp16_openvino_model")
    info = E.openvino_info(f)
    assert (info["precision"], info["dynamic"], info["imgsz"]) == ("fp16", True, [96, 96])
    r = E.verify_openvino(f, every_block)
    assert r.passed, r.summary()
    assert r.tolerance["raw_rel"] == E.TOLERANCE["fp16"] == 1e-2 and "asked f32" in r.runtime
    worst = max(c.value for c in r.checks if c.name == "raw")
    assert 1e-5 < worst <= 1e-2  # rounded weights: far above fp32's 1e-7, within the fp16 limit
    assert sum(c.detail["matched"] for c in r.checks if c.name == "nms") > 0


def perturb_ir(src: Path, dst: Path, layer: str, scale: float = 0.1) -> Path:
    """Copy the IR folder ``src`` to ``dst`` and add noise (``scale`` x the weight's std) to the Const ``layer`` in
    its .bin, found through the .xml's ``offset``/``size``; returns the new .xml."""
    shutil.copytree(src, dst)
    xml = next(dst.glob("*.xml"))
    node = next(n for n in ET.parse(xml).iter("layer") if n.get("name") == layer and n.get("type") == "Const")
    data = node.find("data")
    assert data.get("element_type") == "f32"
    off, size = int(data.get("offset")), int(data.get("size"))
    buf = bytearray(xml.with_suffix(".bin").read_bytes())
    w = np.frombuffer(bytes(buf[off:off + size]), np.float32)
    w = w + np.random.default_rng(0).normal(0, scale * w.std(), w.shape).astype(np.float32)
    buf[off:off + size] = w.tobytes()
    xml.with_suffix(".bin").write_bytes(bytes(buf))
    return xml


def test_perturbed_ir_fails_with_exit_1(every_block, tmp_path, capsys):
    """One weight of the exported IR (the class conv of the P3 level) perturbed: verification FAILs, exit code 1."""
    d = Path(every_block).parent
    good = d / "every_openvino_model"
    if not good.exists():
        E.export_openvino(every_block, (96, 160))
    detect = len(YOLO(every_block).model.model) - 1
    bad = perturb_ir(good, tmp_path / "bad_openvino_model", f"self.model.{detect}.cv3.0.2.weight")
    (bad.parent / "every.verify.json").unlink(missing_ok=True)
    assert cli.main(["export", f"model={every_block}", f"openvino={bad.parent}"]) == 1
    out = capsys.readouterr().out
    assert "  FAIL     raw" in out and "Failed: raw b1 96x160 (2 images): rel diff" in out and "> 1e-04" in out
    assert "Verification FAILED; the exported files are kept" in out and bad.exists()
    rep = json.loads(bad.with_suffix(".verify.json").read_text())
    raw = next(c for c in rep["checks"] if c["name"] == "raw")
    assert not rep["passed"] and raw["value"] > 1e-4 and raw["detail"]["scores"]["max_abs"] > 0
    assert cli.main(["export", f"model={every_block}", f"openvino={good}", "overwrite=True"]) == 0  # the original


def test_untrained_model_reports_nms_not_run(tmp_path, capsys):
    """Scores at the bias init (no box above conf): the nms checks are NOT RUN, apart from the passes, never PASS."""
    (tmp_path / "raw.yaml").write_text(yaml.safe_dump(M.tiny_yaml("CBAM")))
    torch.manual_seed(0)
    YOLO(str(tmp_path / "raw.yaml")).save(str(tmp_path / "raw.pt"))
    assert cli.main(["export", f"model={tmp_path / 'raw.pt'}", "format=openvino", "imgsz=64"]) == 0
    out = capsys.readouterr().out
    rep = json.loads((tmp_path / "raw_openvino_model" / "raw.verify.json").read_text())
    nms = [c for c in rep["checks"] if c["name"] == "nms"]
    assert nms and all(c["not_run"] and not c["passed"] for c in nms) and rep["checks_not_run"] == len(nms)
    assert "  NOT RUN  nms" in out and "in the torch or the openvino output" in out and "1 not run" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["format=openvino", "opset=17"], "opset= applies to format=onnx only"),
        (["format=openvino", "out=x.onnx"], "expected a folder named <name>_openvino_model"),
        (["format=openvino", "openvino=/nonexistent_openvino_model"], "no such OpenVINO model"),
        (["format=openvino", "source=/nonexistent.jpg"], "no such file"),
    ],
)
def test_openvino_usage_errors(tmp_path, args, message, capsys):
    pt = tmp_path / "m.pt"  # never loaded: every error comes first
    assert cli.main(["export", f"model={pt}", *args]) == 2
    assert message in capsys.readouterr().err


def test_existing_folder_is_not_replaced(every_block, tmp_path, capsys):
    pt = shutil.copy(every_block, tmp_path / "best.pt")
    (tmp_path / "best_openvino_model").mkdir()
    (tmp_path / "best_openvino_model" / "mine.txt").write_text("keep")
    assert cli.main(["export", f"model={pt}", "format=openvino", "imgsz=64"]) == 2
    err = capsys.readouterr().err
    assert "the OpenVINO folder" in err and "pass overwrite=True" in err and "best-dynamic_openvino_model" in err
    assert (tmp_path / "best_openvino_model" / "mine.txt").read_text() == "keep"


# ---------------------------------------------------------------------------------------------------------- TensorRT
def test_engine_refused_at_once_without_cuda(tmp_path):
    """format=engine with no CUDA device: one line on stderr, exit 2, before the model is even looked for."""
    code = "import sys, attn_yolo_console; sys.exit(attn_yolo_console.main(sys.argv[1:]))"
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, "export", f"model={tmp_path / 'missing.pt'}", "format=engine"],
                       capture_output=True, text=True, timeout=300, cwd=REPO,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO)})
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "format=engine (TensorRT) needs a CUDA GPU; none is visible" in lines[0], r.stderr
    assert r.stdout == "" and time.perf_counter() - t0 < 120
    with pytest.raises(E.NoCudaError):
        E.verify_engine(tmp_path / "x.engine", "x.pt")


# ------------------------------------------------------------------------------------------------------------ matrix
def test_matrix_axes():
    cols = M.variants()
    assert M.opsets()[:2] == [17, 18] and M.opsets()[-1] == min(E.max_opset(), E.runtime.ort_max_opset())
    assert len(cols) == 2 * len(M.opsets()) + 3 and ("openvino", "fp16 dynamic") in cols
    assert other_sizes((M.IMGSZ, M.IMGSZ))[0] != (M.IMGSZ, M.IMGSZ)  # dynamic cells see other sizes


def test_matrix_quick_subset_agrees_with_benchmarks(tmp_path):
    """A few cells, run here: PASS, a refused opset (not supported, with the reason), and each cell that is in the
    BENCHMARKS.md table has the status written there."""
    cells = [M.run_cell("SE", "onnx", "opset 17 dynamic", tmp_path), M.run_cell("MHSA", "openvino", "static", tmp_path),
             M.run_cell("MHSA", "onnx", "opset 13 static", tmp_path)]
    assert [c.status for c in cells] == ["PASS", "PASS", "not supported"], [c.reason for c in cells]
    assert "MHSA (layer 3) needs opset >= 14" in cells[2].reason
    assert all(c.matched > 0 and c.raw_rel <= 1e-4 for c in cells[:2])
    table = M.read_section(REPO / "BENCHMARKS.md")
    assert table, "BENCHMARKS.md has no export matrix: run python scripts/export_matrix.py"
    for c in cells[:2]:
        assert table[(c.block, c.column)] == c.status
    md = tmp_path / "B.md"
    md.write_text("# x\n")
    M.write_section(md, M.matrix_markdown(cells))
    M.write_section(md, M.matrix_markdown(cells))  # replaced, not appended twice
    text = md.read_text()
    assert text.count(M.BEGIN) == 1 and "3 cells: 2 PASS, 0 FAIL, 1 not supported." in text
    assert M.read_section(md)[("MHSA", "ORT opset 13 static")] == "not supported"


@pytest.mark.slow
def test_full_matrix_is_what_benchmarks_says(tmp_path):
    """Every block x every column, run now; the statuses must be those of the table in BENCHMARKS.md."""
    cells = M.run_matrix(folder=tmp_path)
    assert len(cells) == len(MODULES) * len(M.variants())
    assert {(c.block, c.column): c.status for c in cells} == M.read_section(REPO / "BENCHMARKS.md")


def test_engine_header_and_report_name(tmp_path):
    """What can be checked of the TensorRT path without a GPU: Ultralytics' engine header (4-byte length, JSON) is read
    for how it was exported, and its report does not collide with the intermediate ONNX file's."""
    meta = {"imgsz": [640, 640], "stride": 32, "args": {"quantize": 16, "dynamic": False, "batch": 1}}
    blob = json.dumps(meta).encode()
    f = tmp_path / "best.engine"
    f.write_bytes(len(blob).to_bytes(4, "little") + blob + b"\x00serialized-engine")
    assert E.tensorrt_export.engine_info(f) == {"opset": None, "dynamic": False, "precision": "fp16",
                                                "imgsz": [640, 640], "stride": 32}
    (tmp_path / "raw.engine").write_bytes(b"\xff\xff\xff\x7fnot an engine")
    with pytest.raises(ValueError, match="not an Ultralytics TensorRT engine"):
        E.tensorrt_export.engine_info(tmp_path / "raw.engine")
    assert E.report_path(f).name == "best-engine.verify.json" != E.report_path(tmp_path / "best.onnx").name
    if not torch.cuda.is_available():
        with pytest.raises(E.NoCudaError, match="needs a CUDA GPU"):
            E.runtime.EngineRuntime(f)
