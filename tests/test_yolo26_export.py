"""yolo26 (NMS-free end-to-end head) with an attention block: exported and verified through its one-to-one head
(``attn_yolo.export.end2end``) in ONNX, OpenVINO and both INT8 forms. The trained runs are slow (opt-in)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import attn_yolo_console as cli
from attn_yolo.export.end2end import compare_end2end, has_end2end, use_end2end


def _yaml(block: str, folder: Path) -> Path:
    from attn_yolo.insertion.insert import insert_dict

    p = folder / f"yolo26n-{block}.yaml"  # the scale letter in the name: Ultralytics reads the scale from it
    p.write_text(yaml.safe_dump(insert_dict("yolo26n.yaml", block, "backbone")))
    return p


def test_yolo26_is_selected_end_to_end_and_yolo11_is_not(tmp_path):
    from ultralytics import YOLO

    y26, y11 = YOLO(str(_yaml("CBAM", tmp_path))), YOLO("yolo11n.yaml")
    assert has_end2end(y26.model) and not has_end2end(y11.model)
    assert use_end2end(y26) and y26.overrides["nms"] is False and y26.model.end2end
    assert not use_end2end(y11) and "nms" not in y11.overrides


def _dets(rows) -> np.ndarray:
    out = np.zeros((1, 300, 6), np.float32)
    out[0, : len(rows)] = rows
    return out


def test_compare_end2end_matches_detections_and_fails_a_lost_one():
    a = _dets([[10, 10, 50, 50, 0.9, 1], [60, 60, 90, 90, 0.8, 2], [0, 0, 5, 5, 0.251, 0]])
    raw, det = compare_end2end(a, a.copy(), 0.25, 1e-4)
    assert raw.passed and det.passed and det.detail["matched"] == 3
    b = a.copy()
    b[0, 1, 5] = 3  # a class flipped: that detection is unmatched on both sides
    raw, det = compare_end2end(a, b, 0.25, 1e-4)
    assert not det.passed and det.detail["unmatched_torch"] == 1 and det.detail["unmatched_export"] == 1
    c = a.copy()
    c[0, 2, 4] = 0.2495  # below conf, within the score difference: borderline, excused
    _, det = compare_end2end(a, c, 0.25, 1e-2)
    assert det.passed and det.detail["borderline"] == 1
    _, det = compare_end2end(a, b, 0.25, 0.15, iou_min=0.5, max_unmatched=0.34)  # INT8: 1 of 3 may be lost
    assert det.passed
    d = a.copy()
    d[0, :, 4] = 0  # every detection lost (the INT8 failure of Ultralytics #23987)
    _, det = compare_end2end(a, d, 0.25, 0.15, iou_min=0.5, max_unmatched=0.25)
    assert not det.passed and det.detail["n_export"] == 0


def test_yolo26_with_a_block_exports_onnx_through_its_end_to_end_head(tmp_path):
    """fp32 ONNX of an untrained yolo26n + CBAM: the graph's output is the head's top-k ``(1, min(300, anchors), 6)``
    (84 anchors at 64 px) and the raw check compares it with PyTorch's one-to-one head."""
    import onnx

    out = tmp_path / "y26.onnx"
    rc = cli.main(["export", f"model={_yaml('CBAM', tmp_path)}", "imgsz=64", f"out={out}"])
    rep = json.loads(out.with_suffix(".verify.json").read_text())
    raw = next(c for c in rep["checks"] if c["name"] == "raw")
    dims = [d.dim_value for d in onnx.load(str(out)).graph.output[0].type.tensor_type.shape.dim]
    assert rc == 0 and dims == [1, 84, 6] and raw["case"].endswith("end2end") and raw["passed"], raw  # 84 anchors
    from ultralytics import YOLO

    from attn_yolo.export.end2end import head_decode_nodes, head_path
    from attn_yolo.export.int8 import onnx_graph

    g, model = onnx_graph(out), YOLO(str(_yaml("CBAM", tmp_path))).model
    head = head_decode_nodes(g, model)  # what keep_head keeps float: the head's own ops, none of its convs
    assert any(g.op[n] == "TopK" for n in head) and not any(g.op[n] == "Conv" for n in head)
    assert all(n.startswith(f"/{head_path(model)}/") for n in head)


def _report(out: Path, fmt: str) -> dict:
    stem = out.name[: -len("_openvino_model")]
    rep = out.with_suffix(".verify.json") if fmt == "onnx" else out / f"{stem}.verify.json"
    return json.loads(rep.read_text())


@pytest.mark.slow
def test_trained_yolo26_with_cbam_passes_fp32_and_int8_in_both_runtimes(tmp_path):
    """yolo26n + CBAM trained 5 epochs on synthetic-shapes at 96 px (detections exist; about 12 min on 2 cores):
    fp32 ONNX and OpenVINO pass with the end-to-end detections compared; INT8 (``keep_float=auto``) runs its mAP
    comparison on the model's own val images in both runtimes and passes, or its report names the floats it kept
    (the blocks' list and the head's decode, ``head``)."""
    from ultralytics import YOLO

    from attn_yolo.synthetic import QUICK_TRAIN_ARGS, generate

    data = generate(tmp_path / "data", n_train=400, n_val=60, imgsz=96, seed=0)
    YOLO(str(_yaml("CBAM", tmp_path))).train(data=str(data), workers=0, plots=False, device="cpu",
                                             project=str(tmp_path), name="y26", exist_ok=True, verbose=False, seed=0,
                                             **{**QUICK_TRAIN_ARGS, "epochs": 5, "imgsz": 96})
    pt = tmp_path / "y26" / "weights" / "best.pt"
    for fmt in ("onnx", "openvino"):
        for int8 in (False, True):
            tag = f"{fmt}-{'int8' if int8 else 'fp32'}"
            out = tmp_path / (f"{tag}.onnx" if fmt == "onnx" else f"{tag}_openvino_model")
            rc = cli.main(["export", f"model={pt}", f"format={fmt}", "imgsz=96", f"out={out}",
                           *(["quantize=8", "fraction=64"] if int8 else [])])
            rep = _report(out, fmt)
            nms = next(c for c in rep["checks"] if c["name"] == "nms")
            assert nms["case"].endswith("end2end") and not nms["not_run"] and nms["detail"]["matched"] > 0, nms
            if not int8:
                assert rc == 0, rep
                continue
            m = next(c for c in rep["checks"] if c["name"] == "map")
            kf = rep["int8"]["keep_float"]
            assert not m["not_run"] and rep["int8"]["fp32"] > 0, m
            assert rc == 0 or kf["nodes"], (fmt, m, kf)  # passes, or names what it kept float
