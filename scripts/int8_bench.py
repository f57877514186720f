"""INT8 benchmark per block: yolo11n with the block at the backbone, trained briefly on the embedded synthetic-shapes
data, exported INT8 for ONNX Runtime (static QDQ) and OpenVINO (NNCF) with and without the block's keep-float list;
the mAP50-95 drop INT8 − fp32 (paired image bootstrap) against the baseline's own drop, and INT8/fp32 latency paired
in one run. Writes the table into docs/benchmarks/int8.md (``--out``).

    python scripts/int8_bench.py                                  # baseline + every block (hours on 2 cores)
    python scripts/int8_bench.py --blocks SE CBAM MHSA --epochs 2 --n-train 400 --n-val 100 --imgsz 96
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MARKERS = ("<!-- int8-bench:begin -->", "<!-- int8-bench:end -->")  # its section in docs/benchmarks/int8.md
sys.path.insert(0, str(ROOT))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def train(block: str, data: str, work: Path, a) -> str:
    """``last.pt`` of yolo11n (+ ``block`` at the backbone) trained on ``data`` (cached in ``work``)."""
    from ultralytics import YOLO

    from attn_yolo.insertion.insert import insert_dict
    from attn_yolo.synthetic import QUICK_TRAIN_ARGS

    pt = work / block / "weights" / "last.pt"
    if pt.exists():
        return str(pt)
    model = "yolo11n.yaml"
    if block != "baseline":
        model = str(work / f"yolo11n-{block}.yaml")
        Path(model).write_text(yaml.safe_dump(insert_dict("yolo11n.yaml", block, "backbone")))
    kw = {**QUICK_TRAIN_ARGS, "epochs": a.epochs, "imgsz": a.imgsz}
    YOLO(model).train(data=data, workers=0, plots=False, device="cpu", project=str(work), name=block, exist_ok=True,
                      verbose=False, seed=0, **kw)
    return str(pt)


def measure(pt: str, data: str, work: Path, a) -> list[dict]:
    """One row per (format, keep-float): fp32 / INT8 mAP, drop and interval, latency."""
    from ultralytics import YOLO

    from attn_yolo.export.int8 import export_int8, keep_float_scopes
    from attn_yolo.export.int8_verify import verify_int8

    yolo = YOLO(pt)
    rows = []
    for fmt in ("onnx", "openvino"):
        for keep in (False, True) if keep_float_scopes(yolo.model) else (False,):
            tag = f"{Path(pt).parents[1].name}-{fmt}-{'kf' if keep else 'plain'}"
            out = work / "int8" / (f"{tag}.onnx" if fmt == "onnx" else f"{tag}_openvino_model")
            f, kept = export_int8(yolo, fmt, a.imgsz, data, a.fraction, keep, out=out, overwrite=True)
            r = verify_int8(fmt, f, yolo, data, n_boot=a.n_boot)
            rows.append({"fmt": fmt, "keep": keep, "nodes": sum(len(v) for v in kept.values()), **r.int8})
            print(tag, {k: v for k, v in rows[-1].items() if k != "latency"}, rows[-1]["latency"], flush=True)
    return rows


def table(results: dict) -> list[str]:
    base = {(r["fmt"]): r for r in results.get("baseline", []) if not r["keep"]}
    head = ["| block | runtime | fp32 mAP50-95 | INT8 drop (Ultralytics' rules) | INT8 drop (keep-float) | baseline's "
            "drop | excess over baseline (rules / keep-float) | INT8/fp32 latency (rules / keep-float) |",
            "|---|---|---|---|---|---|---|---|"]
    rows = []
    for block, rs in results.items():
        for fmt in ("onnx", "openvino"):
            plain = next(r for r in rs if r["fmt"] == fmt and not r["keep"])
            kf = next((r for r in rs if r["fmt"] == fmt and r["keep"]), None)
            b = base.get(fmt)

            def d(r):
                return f"{r['drop']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]" if r else "–"

            exc = (f"{plain['drop'] - b['drop']:+.2f} / " + (f"{kf['drop'] - b['drop']:+.2f}" if kf else "–")) \
                if b and block != "baseline" else "–"
            lat = f"{plain['latency']['ratio']:.2f} / " + (f"{kf['latency']['ratio']:.2f}" if kf else "–")
            name = {"onnx": "onnxruntime", "openvino": "OpenVINO"}[fmt]
            kept = f" ({kf['nodes']} nodes)" if kf else ""
            rows.append(f"| {block} | {name} | {plain['fp32']:.2f} | {d(plain)} | {d(kf)}{kept} | "
                        f"{d(b) if b else '–'} | {exc} | {lat} |")
    return head + rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", nargs="*", default=None, help="blocks (default: all of attn_yolo.registry.MODULES)")
    ap.add_argument("--imgsz", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--n-train", type=int, default=400)
    ap.add_argument("--n-val", type=int, default=100)
    ap.add_argument("--fraction", type=float, default=1.0, help="share of the training split that calibrates")
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--work", default=None, help="folder for models and exports (default: a temp folder)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "int8.md"))
    ap.add_argument("--results", nargs="+", default=None,
                    help="results.json of runs (in their --work): re-render their merged table")
    ap.add_argument("--no-baseline", dest="baseline", action="store_false",
                    help="skip the baseline (merge with a run that has it: --results)")
    a = ap.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    import tempfile

    from attn_yolo.registry import MODULES, register
    from attn_yolo.synthetic import generate

    register()
    work = Path(a.work or tempfile.mkdtemp(prefix="attn-yolo-int8-bench-"))
    data = None if a.results else str(generate(work / "data", n_train=a.n_train, n_val=a.n_val, imgsz=a.imgsz, seed=0))
    blocks = [*(["baseline"] if a.baseline else []), *(a.blocks if a.blocks is not None else MODULES)]
    t0, loads, results = time.time(), [os.getloadavg()[0]], {}
    if a.results:  # re-render finished runs' table (their commands, loads and minutes as recorded), merged
        runs = [json.loads(Path(f).read_text()) for f in a.results]
        results = {k: v for r in runs for k, v in r["results"].items()}
        loads = [x for r in runs for x in r["loads"]]
        cmd, minutes = "`; `".join(r["cmd"] for r in runs), sum(r["minutes"] for r in runs)
        a = ap.parse_args(shlex.split(runs[0]["cmd"])[2:])  # the settings the runs had (all alike), for the header
        blocks = []
    for b in blocks:
        results[b] = measure(train(b, data, work, a), data, work, a)
        loads.append(os.getloadavg()[0])
        minutes = (time.time() - t0) / 60
        cmd = "python scripts/int8_bench.py " + " ".join(sys.argv[1:])
        saved = {"results": results, "loads": loads, "cmd": cmd, "minutes": minutes}
        (work / "results.json").write_text(json.dumps(saved, indent=1, default=float))
    lines = ["# INT8 per block (`scripts/int8_bench.py`): mAP50-95 drop against fp32 and the baseline's, latency", "",
             f"Regenerate: `{cmd}`. Machine: {cpu_model()}, {os.cpu_count()} cores, shared with other jobs (1-min "
             f"load {min(loads):.1f}-{max(loads):.1f} during the run); {datetime.now(timezone.utc):%Y-%m-%d %H:%M} "
             f"UTC; {minutes:.0f} min.", "",
             f"Each model: yolo11n (+ the block at the backbone, `attn_yolo.insertion`), {a.epochs} epochs on "
             f"synthetic-shapes ({a.n_train} train / {a.n_val} val images at {a.imgsz} px, seed 0). INT8 through "
             f"Ultralytics' exporter (`quantize=8`), calibrated on the training split (fraction {a.fraction}); "
             f"'keep-float' adds the block's keep-float list (`attn_yolo.export.int8.keep_float_scopes`). Drops are "
             f"mAP50-95 points fp32 PyTorch − INT8 on the val split, with a 95 % paired image bootstrap interval "
             f"({a.n_boot} resamples); a positive drop is a loss. Latency: batch 1, medians of paired alternating "
             f"rounds in one process (`int8_verify.paired_latency`); < 1 means INT8 is faster.", "",
             *table(results), ""]
    from attn_yolo.export.matrix import write_section

    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    if not Path(a.out).exists():
        Path(a.out).write_text("# INT8 export: accuracy and latency per block\n")
    write_section(a.out, "\n".join(lines[2:]), MARKERS, lines[0].removeprefix("# "))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
