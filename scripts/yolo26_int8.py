"""yolo26n (NMS-free end-to-end head), stock and with attention blocks, through ONNX, OpenVINO and both INT8 forms.

Each model is trained on synthetic-shapes (``attn_yolo.synthetic``), then exported and verified with
``attn-yolo export`` (fp32 ONNX, fp32 OpenVINO, ``quantize=8`` for both, Ultralytics' rules: ``keep_float=False``):
end-to-end detections against PyTorch's one-to-one head, mAP50-95 on the model's own validation images for INT8. The
table (detections matched, mAP50-95 fp32 → INT8, latency ratio) goes into docs/benchmarks/int8.md (``--page``).

    python scripts/yolo26_int8.py                              # yolo26n and yolo26n + CBAM, 5 epochs at 96 px
    python scripts/yolo26_int8.py --blocks CBAM MHSA --epochs 5 --work /tmp/y26
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MARKERS = ("<!-- yolo26-int8:begin -->", "<!-- yolo26-int8:end -->")
sys.path.insert(0, str(ROOT))


def train(block: str, data: Path, work: Path, epochs: int, imgsz: int) -> Path:
    from ultralytics import YOLO

    from attn_yolo.insertion.insert import insert_dict
    from attn_yolo.synthetic import QUICK_TRAIN_ARGS

    pt = work / block / "weights" / "best.pt"
    if not pt.exists():
        model = "yolo26n.yaml"
        if block != "yolo26n":
            model = str(work / f"yolo26n-{block}.yaml")  # the scale letter in the name: Ultralytics reads it there
            Path(model).write_text(yaml.safe_dump(insert_dict("yolo26n.yaml", block, "backbone")))
        YOLO(model).train(data=str(data), workers=0, plots=False, device="cpu", project=str(work), name=block,
                          exist_ok=True, verbose=False, seed=0, **{**QUICK_TRAIN_ARGS, "epochs": epochs,
                                                                  "imgsz": imgsz})
    return pt


def export(pt: Path, fmt: str, int8: bool, imgsz: int, work: Path) -> dict:
    """``attn-yolo export`` of ``pt``; its exit code and report."""
    import attn_yolo_console as cli

    tag = f"{pt.parents[1].name}-{'int8' if int8 else 'fp32'}-{fmt}"
    out = work / (f"{tag}.onnx" if fmt == "onnx" else f"{tag}_openvino_model")
    argv = ["export", f"model={pt}", f"format={fmt}", f"imgsz={imgsz}", f"out={out}", "overwrite=True"]
    if int8:
        argv += ["quantize=8", "keep_float=False", "int8_max_drop=100"]
    rc = cli.main(argv)
    rep = out.with_suffix(".verify.json") if fmt == "onnx" else out / f"{tag}.verify.json"
    return {"rc": rc, **json.loads(rep.read_text())}


def cell(r: dict) -> str:
    det = next(c for c in r["checks"] if c["name"] == "nms")
    d = det["detail"]
    text = f"{'PASS' if r['passed'] else 'FAIL'}: {d['matched']}/{d['n_torch']} detections matched"
    if r.get("int8"):
        i = r["int8"]
        text += (f"; mAP50-95 {i['fp32']:.2f} → {i['int8']:.2f} (drop {i['drop']:+.2f} [{i['lo']:+.2f}, "
                 f"{i['hi']:+.2f}]); ×{i['latency']['ratio']:.2f} latency")
    return text


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", nargs="*", default=["CBAM"])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--imgsz", type=int, default=96)
    ap.add_argument("--work", default=None)
    ap.add_argument("--page", default=str(ROOT / "docs" / "benchmarks" / "int8.md"))
    a = ap.parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from attn_yolo.export.cpu import cpu_line
    from attn_yolo.export.matrix import write_section
    from attn_yolo.registry import register
    from attn_yolo.synthetic import generate

    register()
    work = Path(a.work or tempfile.mkdtemp(prefix="attn-yolo-yolo26-"))
    data = generate(work / "data", n_train=400, n_val=60, imgsz=a.imgsz, seed=0)
    rows = ["| model | ONNX fp32 | OpenVINO fp32 | ONNX Runtime INT8 | OpenVINO INT8 |", "|---|---|---|---|---|"]
    for block in ["yolo26n", *a.blocks]:
        pt = train(block, data, work, a.epochs, a.imgsz)
        cells = [cell(export(pt, fmt, int8, a.imgsz, work)) for int8 in (False, True) for fmt in ("onnx", "openvino")]
        rows.append(f"| {block if block == 'yolo26n' else 'yolo26n + ' + block} | " + " | ".join(cells) + " |")
    cmd = "python scripts/yolo26_int8.py" + (f" {shlex.join(argv)}" if argv else "")
    body = [f"Regenerate: `{cmd}` ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {cpu_line()}).", "",
            f"Each model trained {a.epochs} epochs on synthetic-shapes (400 train / 60 val images at {a.imgsz} px, "
            "seed 0), exported through its end-to-end head (`nms=False`: top-k rows, no NMS) and verified against "
            "PyTorch's one-to-one head on 2 val images; INT8 by Ultralytics' rules (`keep_float=False`), mAP50-95 on "
            "the 60 val images (batch 1), paired bootstrap interval.", "", *rows]
    text = "\n".join(body)
    write_section(a.page, text, MARKERS, "yolo26n (end-to-end head) in INT8 (`scripts/yolo26_int8.py`)")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
