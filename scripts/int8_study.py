"""The INT8 study on trained detectors (``attn_yolo.export.int8_study``): train, export, measure, write the page.

Every block at the backbone of the embedded default ablation's shared start (yolo11n, 128 px, synthetic-shapes),
fine-tuned as the ablation does with its attention check, exported INT8 for ONNX Runtime and OpenVINO with the
keep-float list; the table goes into docs/benchmarks/int8.md (``--page``; with another ``--out``, into
``<out>/int8.md``). A rerun with the same ``--out`` reuses the
finished training runs (the ablation's resume).

    python scripts/int8_study.py                                   # every block, seeds 0 1 2 (47 min on 2 quiet cores)
    python scripts/int8_study.py --blocks SE CBAM --seeds 0 1 --out /tmp/s          # page: /tmp/s/int8.md
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = "runs/study/int8"
PAGE = ROOT / "docs" / "benchmarks" / "int8.md"


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", nargs="*", default=None, help="blocks (default: every block of attn_yolo.registry)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="fixed paired seeds of the ablation")
    ap.add_argument("--out", default=OUT, help=f"study folder: ablation/, int8/ (default {OUT})")
    ap.add_argument("--page", default=None, help="the page whose study section is replaced (default: "
                    "docs/benchmarks/int8.md with the default --out, else <out>/int8.md)")
    ap.add_argument("--fraction", type=lambda v: int(v) if v.isdigit() and int(v) > 1 else float(v), default=1.0,
                    help="share (0, 1] of the training split that calibrates, or a count of images (an int > 1)")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--data", default=None, help="dataset (default: the ablation default's, synthetic)")
    ap.add_argument("--imgsz", type=int, default=None, help="default: the ablation default's (128)")
    ap.add_argument("--start-epochs", type=int, default=None, help="default: the ablation default's recipe (5)")
    ap.add_argument("--start", default=None, help="a trained checkpoint as the shared start instead of the recipe")
    ap.add_argument("--devices", default=None, help="e.g. cpu (one worker); default: the ablation default's")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    a = parse(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from attn_yolo.export.int8_study import MARKERS, StudyError, render, run_study, study_config
    from attn_yolo.export.matrix import write_section
    from attn_yolo.registry import MODULES

    blocks = a.blocks if a.blocks is not None else list(MODULES)
    unknown = [b for b in blocks if b not in MODULES]
    if unknown:
        print(f"int8_study: unknown blocks {unknown}; allowed: {', '.join(MODULES)}", file=sys.stderr)
        return 2
    over: dict = {}
    if a.data:
        over["data"] = a.data
    if a.imgsz is not None:
        over["train"] = {"imgsz": a.imgsz}
    if a.start_epochs is not None:
        over["start"] = {"epochs": a.start_epochs}
    if a.start:
        over["start"] = str(Path(a.start).resolve())
    if a.devices:
        over["devices"] = a.devices
    out = Path(a.out).resolve()
    try:
        res = run_study(study_config(out / "ablation", blocks, a.seeds, **over), out, a.fraction, a.n_boot)
    except StudyError as e:
        print(f"int8_study: {e}", file=sys.stderr)
        return 2
    page = Path(a.page) if a.page else PAGE if a.out == OUT else out / "int8.md"
    body = render(res, "python scripts/int8_study.py " + shlex.join(argv))
    write_section(page, body, MARKERS, "INT8 per block on trained detectors (`scripts/int8_study.py`)")
    print(body)
    print(f"int8_study: the table is in {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
