"""Two checkouts' exported detectors timed against each other in onnxruntime and OpenVINO, paired round by round.

A code change that must leave the deployed graphs as fast as before (issue 34: the blocks lost their CPU-only
second forwards) is checked here on one machine in one run, not against figures from another day or CPU:

    cd <old checkout> && python /path/to/scripts/ab_exports.py export --out /tmp/ab/old
    cd <new checkout> && python scripts/ab_exports.py export --out /tmp/ab/new
    python scripts/ab_exports.py time --old /tmp/ab/old --new /tmp/ab/new --rounds 30

``export`` writes, with the checkout's own ``attn_yolo`` (the one on ``sys.path``), the ONNX file and the OpenVINO
IR of yolo11n and of each ``models/yolo11n-<block>.yaml`` at ``--imgsz`` (the bench's exporters: Ultralytics'
exporter, fp32, static, seed 0). ``time`` runs every file of both folders once per round, round-robin, in one
process (``attn_yolo.bench.common.interleaved_times``) and prints, per model, the median of the per-round ratios
new/old with its distribution-free 95 % CI (``median_ci``), and whether the two ONNX graphs hold the same sequence of
ops (else the op counts that differ). yolo11n itself is the null control: the change does not touch it, so its
ratio shows the noise floor of the run; so does every model whose graph is the same.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
from pathlib import Path

VARIANTS = ("se,eca,sam,cbam,mhsa,coordatt,ema,simam,nam,shuffleattention,tripletattention,lska,mlca,ela,caa,"
            "skattention,bilevelroutingattention,gam,c3k2_cbam")


def export(out: Path, variants: str, imgsz: int) -> None:
    """Each model's ``<name>.onnx`` and ``<name>_openvino/`` under ``out``, from the ``attn_yolo`` on ``sys.path``."""
    import torch

    import attn_yolo
    from attn_yolo.bench.blocks import detector_yamls, export_onnx_cached, export_openvino_cached

    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"
    for name, yaml in detector_yamls(variants.split(",")).items():
        torch.manual_seed(0)
        shutil.copy(export_onnx_cached(yaml, imgsz, cache), out / f"{name}.onnx")
        torch.manual_seed(0)
        xml = export_openvino_cached(yaml, imgsz, cache)
        shutil.copytree(xml.parent, out / f"{name}_openvino", dirs_exist_ok=True)
    (out / "SOURCE").write_text(f"{Path(attn_yolo.__file__).parent}\n")
    print(f"exported {len(list(out.glob('*.onnx')))} models from {Path(attn_yolo.__file__).parent} into {out}")


def _runners(folder: Path, threads: int) -> dict[str, dict]:
    """Per model: its onnxruntime session (``attn_yolo.export.ort_session``) and compiled OpenVINO model
    (``OpenVINORuntime``, f32 inference), each as a zero-argument callable on one fixed input."""
    import numpy as np

    from attn_yolo.export import OpenVINORuntime, ort_session
    from attn_yolo.export.runtime import ort_raw

    out = {}
    for onnx in sorted(folder.glob("*.onnx")):
        sess = ort_session(onnx, threads)
        x = np.random.default_rng(0).random([1, *sess.get_inputs()[0].shape[1:]], dtype=np.float32)
        rt = OpenVINORuntime(next((folder / f"{onnx.stem}_openvino").glob("*.xml")), "f32", threads)
        out[onnx.stem] = {"onnxruntime": lambda s=sess, x=x: ort_raw(s, x), "OpenVINO": lambda r=rt, x=x: r.run(x)}
    return out


def graph_change(old: Path, new: Path) -> str:
    """``same ops`` when the two ONNX graphs run the same op sequence, else the op counts that differ
    (``Conv 106 → 100``)."""
    import collections

    import onnx

    a, b = ([n.op_type for n in onnx.load(str(f), load_external_data=False).graph.node] for f in (old, new))
    if a == b:
        return "same ops"
    ca, cb = collections.Counter(a), collections.Counter(b)
    diff = sorted(k for k in {*ca, *cb} if ca[k] != cb[k])
    return ", ".join(f"{k} {ca[k]} → {cb[k]}" for k in diff) or "same op counts, another order"


def time_pairs(old: Path, new: Path, rounds: int, threads: int) -> str:
    """The markdown table of new/old per model and runtime (medians of per-round ratios, 95 % CIs)."""
    from attn_yolo.bench.common import interleaved_times, median_ci

    a, b = _runners(old, threads), _runners(new, threads)
    names = [n for n in a if n in b]
    rows = ["| model | ONNX graph | " + " | ".join(f"{rt} old ms | {rt} new ms | {rt} new/old (95% CI)"
                                                   for rt in ("onnxruntime", "OpenVINO")) + " |",
            "|---|" + "---|" * 7]
    cells = {n: [graph_change(old / f"{n}.onnx", new / f"{n}.onnx")] for n in names}
    for rt in ("onnxruntime", "OpenVINO"):
        fns = {f"{n}/{side}": r[n][rt] for n in names for side, r in (("old", a), ("new", b))}
        times = interleaved_times(fns, rounds)
        for n in names:
            o, w = times[f"{n}/old"], times[f"{n}/new"]
            ratios = [y / x for x, y in zip(o, w)]
            lo, hi = median_ci(ratios)
            cells[n] += [f"{statistics.median(o) * 1e3:.1f}", f"{statistics.median(w) * 1e3:.1f}",
                         f"{statistics.median(ratios):.3f} ({lo:.3f}–{hi:.3f})"]
    rows += [f"| {n} | " + " | ".join(cells[n]) + " |" for n in names]
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export every model with the attn_yolo on sys.path")
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--variants", default=VARIANTS)
    e.add_argument("--imgsz", type=int, default=640)
    t = sub.add_parser("time", help="time two export folders against each other")
    t.add_argument("--old", type=Path, required=True)
    t.add_argument("--new", type=Path, required=True)
    t.add_argument("--rounds", type=int, default=30)
    t.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    if args.cmd == "export":
        export(args.out, args.variants, args.imgsz)
        return
    for f in (args.old, args.new):
        if not any(f.glob("*.onnx")):
            p.error(f"--old/--new {f}: no .onnx files (run `export --out {f}` first)")
    table = time_pairs(args.old, args.new, args.rounds, args.threads)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; {args.rounds} rounds, {args.threads} threads; "
          f"old: {(args.old / 'SOURCE').read_text().strip()}, new: {(args.new / 'SOURCE').read_text().strip()}\n")
    print(table)


if __name__ == "__main__":
    main()
