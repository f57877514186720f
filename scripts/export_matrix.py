#!/usr/bin/env python
"""The export matrix: every block × ONNX opset 17 / 18 / newest × static / dynamic (onnxruntime) and OpenVINO
static / dynamic / fp16, each cell exported with Ultralytics' exporter and verified against PyTorch; writes the table
into BENCHMARKS.md (between the export-matrix markers).

    python scripts/export_matrix.py                        # all 12 blocks, all columns; writes BENCHMARKS.md
    python scripts/export_matrix.py blocks=SE,MHSA write=  # some blocks, print only
    python scripts/export_matrix.py formats=openvino write= # OpenVINO columns only

Exit code: 0 no cell FAILed, 1 some cell FAILed, 2 bad arguments.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without `pip install`


def main(argv: list[str]) -> int:
    from attn_yolo.args import UsageError, kv_args

    try:
        keys = {"blocks": None, "formats": "onnx,openvino", "write": None, "threads": 1, "int8": False}
        a = kv_args(argv, keys, "export_matrix")
        if a["write"] is None:
            a["write"] = str(REPO / ("docs/benchmarks/int8.md" if a["int8"] is True else "BENCHMARKS.md"))
        from attn_yolo.registry import MODULES

        blocks = list(MODULES) if a["blocks"] is None else [b.strip() for b in str(a["blocks"]).split(",")]
        bad = [b for b in blocks if b not in MODULES]
        if bad:
            raise UsageError(f"export_matrix: blocks={a['blocks']!r}: unknown {bad}; allowed: {', '.join(MODULES)}")
        formats = [f.strip() for f in str(a["formats"]).split(",")]
        if not formats or not set(formats) <= {"onnx", "openvino"}:
            raise UsageError(f"export_matrix: formats={a['formats']!r}; allowed: onnx, openvino (comma-separated)")
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import onnxruntime
    import openvino
    import torch
    import ultralytics

    from attn_yolo.export.matrix import (
        IMGSZ,
        INT8_MARKERS,
        INT8_VARIANTS,
        matrix_markdown,
        run_matrix,
        variants,
        write_section,
    )
    from attn_yolo.export.runtime import ort_max_opset
    from attn_yolo.export.verify import other_sizes

    torch.set_num_threads(int(a["threads"]))
    t0, load0 = time.perf_counter(), os.getloadavg()[0]

    def progress(c):
        print(f"{c.block:<17} {c.column:<22} {c.status:<13} {c.seconds:5.1f} s  {c.reason[:100]}", flush=True)

    columns = INT8_VARIANTS if a["int8"] is True else variants()
    cells = run_matrix(blocks, [v for v in columns if v[0] in formats], progress=progress)
    wall, load1 = time.perf_counter() - t0, os.getloadavg()[0]
    from attn_yolo.export.onnx_export import max_opset

    sizes = " and ".join(f"{h}x{w}" for h, w in other_sizes((IMGSZ, IMGSZ)))
    header = (
        f"Produced by `python scripts/export_matrix.py` on {time.strftime('%Y-%m-%d')} ({platform.processor() or 'CPU'}"
        f", {torch.get_num_threads()} thread; load average {load0:.1f} at the start, {load1:.1f} at the end; "
        f"{wall:.0f} s): torch {torch.__version__}, ultralytics {ultralytics.__version__}, onnxruntime "
        f"{onnxruntime.__version__}, OpenVINO {openvino.get_version().split('-')[0]}. Each block sits in a tiny "
        f"calibrated detector (`attn_yolo.export.matrix.tiny_yaml`, block at P3) exported at {IMGSZ}x{IMGSZ}; "
        f"static cells are checked at batch 1 on bus.jpg and zidane.jpg, dynamic ones also at batch 3, {sizes}. "
        "PASS shows the worst raw difference (box error / max box, or score error; limit 1e-4, fp16 1e-2) "
        f"and means the NMS detections matched too. The newest opset is {min(max_opset(), ort_max_opset())}: torch's "
        f"TorchScript ONNX exporter (Ultralytics') writes up to {max_opset()}; onnxruntime loads up to "
        f"{ort_max_opset()} (probed). OpenVINO has no opset: its columns are static, dynamic and fp16 weights "
        "(dynamic), run on OpenVINO's CPU plugin (fp32: f32 inference).\n"
    )
    if a["int8"] is True:
        header = (
            f"Produced by `python scripts/export_matrix.py int8=True` on {time.strftime('%Y-%m-%d %H:%M')} "
            f"({platform.processor() or 'CPU'}, {os.cpu_count()} cores shared with other jobs, "
            f"{torch.get_num_threads()} thread; load average {load0:.1f} at the start, {load1:.1f} at the end; "
            f"{wall:.0f} s). Each block in "
            f"the tiny calibrated detector at {IMGSZ}x{IMGSZ}, exported INT8 by Ultralytics (`quantize=8`, ONNX "
            "Runtime static QDQ / OpenVINO NNCF) calibrated on 8 synthetic-shapes images, verified by "
            "`attn_yolo.export.int8_verify` (raw per head ≤ 0.15, NMS IoU ≥ 0.5 with ≤ 25 % unmatched). PASS ×r: "
            "INT8 latency / fp32 latency, batch 1, paired in one run (< 1: INT8 faster). The tiny model is untrained: "
            "its mAP check compares near-zero figures; the per-block mAP drops are in the table above.\n"
        )
    body = matrix_markdown(cells, header)
    print(body)
    if a["write"]:
        if a["int8"] is True:
            write_section(a["write"], body, INT8_MARKERS, "INT8 export matrix (`scripts/export_matrix.py int8=True`)")
        else:
            write_section(a["write"], body)
        print(f"wrote the export matrix into {a['write']}")
    return 1 if any(c.status == "FAIL" for c in cells) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
