#!/usr/bin/env python
"""GPU check, about 5-8 minutes on one CUDA GPU (two TensorRT engine builds included); prints a Markdown block for
BENCHMARKS.md.

    python scripts/gpu_check.py                    # runs under a temporary folder
    python scripts/gpu_check.py out=runs/gpu-check # keeps the training runs there

1. SDPA backends: MHSA(128, heads=4) with flash, memory-efficient, cuDNN and math attention forced in turn, plus the
   explicit and Ultralytics variants, under fp16 and bf16 autocast at 1,600 / 6,400 / 25,600 tokens (the benchmark's
   GPU section, ``attn_yolo.bench.sdpa_backend_rows``): kernel that ran, median ms, peak MiB.
2. Ultralytics' own attention, stock vs fused (``attn_yolo.fuse_attention``): yolo11n and yolo12n at 640 and 1280 px,
   batch 2, forward and training step under fp16 and bf16 autocast, with PyTorch's dispatcher and with the flash and
   memory-efficient backends forced (``attn_yolo.bench.ultralytics_attn.device_rows``): kernels, median ms, speed ×
   stock, peak MiB. Passes when every fused row ran and the dispatcher's fused row is no slower than stock (≥ 0.97×).
3. AMP training: one epoch of yolo11n + MHSA and yolo11n + CBAM (``models/yolo11n-mhsa.yaml``, ``-cbam.yaml``) on the
   synthetic-shapes data (``attn_yolo.synthetic``), with fp16 AMP and, where the GPU supports it, bf16 AMP. Passes
   when AMP stayed on, the training loss is finite and mAP50-95 > 0.
4. A 2-variant x 1-seed ablation (yolo11n vs + CBAM, one epoch) with ``devices: [0]``: every run ok.
5. TensorRT: yolo11n + CBAM and yolo11n + MHSA (calibrated random weights, ``attn_yolo.export.matrix.calibrate``)
   exported as FP16 engines (``attn_yolo.export.tensorrt_export``, Ultralytics' exporter), verified against fp32
   PyTorch on CUDA (raw head outputs within the fp16 tolerance, NMS detections; ``verify_engine``), and timed
   (median ms, batch 1, against PyTorch on the same GPU). Passes when every verification passed.

Exit code: 0 every check passed, 1 some check failed, 2 no CUDA device (said at once, before any work).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")  # GPU machines may have no internet; nothing here downloads
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without `pip install`

TOKENS = (1600, 6400, 25600)
MODELS = {"yolo11n + MHSA": REPO / "models/yolo11n-mhsa.yaml", "yolo11n + CBAM": REPO / "models/yolo11n-cbam.yaml"}
EPOCH_ARGS = {"epochs": 1, "val": True, "plots": False, "workers": 4}  # on top of synthetic.QUICK_TRAIN_ARGS


def sdpa_section(device: str, tokens=TOKENS, repeats: int = 10) -> tuple[str, bool]:
    """The SDPA backend table; passes when at least one fused backend ran at every (dtype, tokens)."""
    from attn_yolo.bench.gpu import sdpa_backend_rows
    from attn_yolo.markdown import table

    rows = sdpa_backend_rows(device, tokens, repeats=repeats)
    fused_ran = {(r[0], r[1]) for r in rows if r[2].startswith("MHSA fused") and str(r[5])[:1].isdigit()}
    ok = fused_ran == {(r[0], r[1]) for r in rows}
    head = ["dtype", "N", "implementation", "pass", "kernel", "median ms", "peak MiB"]
    return table(head, rows), ok


def ultralytics_attention_section(device: str, **kw) -> tuple[str, bool]:
    """Stock vs fused Ultralytics attention; passes when every fused row ran and the dispatcher's is not slower."""
    from attn_yolo.bench.ultralytics_attn import DEVICE_HEADERS, device_rows
    from attn_yolo.markdown import table

    rows = device_rows(device, **kw)
    ran = all(str(r[6])[:1].isdigit() for r in rows if r[3] in ("stock (explicit)", "fused (dispatcher)"))
    auto = [float(r[7]) for r in rows if r[3] == "fused (dispatcher)" and r[7] is not None]
    ok = ran and bool(auto) and min(auto) >= 0.97
    return table(DEVICE_HEADERS, rows), ok


def amp_dtypes() -> list[str]:
    """fp16, and bf16 where the GPU supports it."""
    import torch

    return ["fp16", "bf16"] if torch.cuda.is_bf16_supported() else ["fp16"]


def amp_training_section(device: str, data: str, out: Path, dtypes, models=MODELS, **train) -> tuple[str, bool]:
    """One epoch of each model with each AMP dtype; a row per training with the pass/fail reason."""
    import torch
    from ultralytics import YOLO

    from attn_yolo.markdown import table
    from attn_yolo.synthetic import QUICK_TRAIN_ARGS

    args = {**QUICK_TRAIN_ARGS, **EPOCH_ARGS, **train}
    rows, ok = [], True
    for dt in dtypes:
        for label, yaml_path in models.items():
            seen = {}

            def note(trainer, seen=seen):  # the epoch's mean training loss (box + cls + dfl) and whether AMP ran
                losses = trainer.tloss.values() if isinstance(trainer.tloss, dict) else [trainer.tloss.sum()]
                seen.update(amp=bool(trainer.amp), loss=sum(float(v) for v in losses))

            if device != "cpu":
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            try:
                model = YOLO(str(yaml_path))
                model.add_callback("on_train_epoch_end", note)
                amp = True if dt == "fp16" else dt
                metrics = model.train(data=data, device=device, amp=amp, seed=0, project=str(out),
                                      name=f"amp-{dt}-{yaml_path.stem}", exist_ok=True, **args)  # fmt: skip
                m50, m, loss = float(metrics.box.map50), float(metrics.box.map), seen.get("loss", math.nan)
                checks = (("AMP off", not seen.get("amp")), (f"loss {loss}", not math.isfinite(loss)),
                          ("mAP50-95 = 0", not m > 0))  # fmt: skip
                problems = [p for p, bad in checks if bad]
            except Exception as e:  # report and go on with the other checks
                m50 = m = None
                problems = [f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"]
            mib = torch.cuda.max_memory_allocated() / 2**20 if device != "cpu" else None
            ok &= not problems
            rows.append([dt, label, "on" if seen.get("amp") else "off", _f(seen.get("loss")), _f(m50), _f(m),
                         f"{time.perf_counter() - t0:.1f}", _f(mib, 0), "; ".join(problems) or "pass"])  # fmt: skip
    head = ["AMP", "model", "AMP active", "train loss", "mAP50", "mAP50-95", "wall s", "peak MiB", "check"]
    return table(head, rows), ok


def ablation_section(device: str, data: str, out: Path, **train) -> tuple[str, bool]:
    """A 2-variant x 1-seed ablation on ``devices: [device]``; the results.csv rows."""
    import yaml

    from attn_yolo import ablate
    from attn_yolo.ablate.runs import latency
    from attn_yolo.ablate.runs.results import read_results
    from attn_yolo.markdown import table
    from attn_yolo.synthetic import QUICK_TRAIN_ARGS

    cfg = {
        "data": data,
        "variants": [{"name": "baseline", "model": "yolo11n.yaml"},
                     {"name": "cbam", "base": "yolo11n.yaml", "module": "CBAM", "at": "backbone", "args": [16, 7]}],
        "seeds": [0],
        "train": {**QUICK_TRAIN_ARGS, **EPOCH_ARGS, **train},
        "out": str(out / "ablation"),
        "latency": {"repeats": 20, "warmup": 5},
        "devices": [device],
    }  # fmt: skip
    path = out / "gpu-check-ablation.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    t0 = time.perf_counter()
    code = ablate.run(path)
    rows = read_results(out / "ablation" / "results.csv")
    timing = latency.read(out / "ablation") or {}  # timed after the runs, apart from training
    ms = {arm: t["median_ms"] for arm, t in timing.get("arms", {}).items()}
    summary = table(["variant", "seed", "status", "device", "mAP50", "mAP50-95", "train s", "latency ms", "error"],
                     [[r["variant"], r["seed"], r["status"], r["device"], _f(r["map50"]), _f(r["map50_95"]),
                       _f(r["train_time_s"], 1), _f(ms.get(r["variant"], float("nan")), 2), r["error"] or ""]
                      for r in rows])  # fmt: skip
    ok = code == 0 and len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    return f"exit code {code}, wall {time.perf_counter() - t0:.0f} s\n\n{summary}", ok


class TorchRunner:
    """PyTorch fp32 inference on ``device``, shaped like a runtime (``run(x)``) so ``latency_ms`` times it the same way
    (synchronised on CUDA)."""

    def __init__(self, model, x, device: str):
        import torch

        self.model, self.x, self.device = model.to(device).eval(), torch.from_numpy(x).to(device), device

    def run(self, _):
        import torch

        with torch.inference_mode():
            self.model(self.x)
        if self.device != "cpu":
            torch.cuda.synchronize()


def deploy_section(device: str, out: Path, fmt: str = "engine", models=MODELS, imgsz: int = 640,
                   repeats: int = 50) -> tuple[str, bool]:
    """Export each model as FP16 ``fmt`` (``engine``; ``openvino`` runs the same code on CPU), verify it against
    PyTorch on ``device`` and time both; a row per model."""
    import numpy as np
    import torch
    from ultralytics import YOLO

    from attn_yolo.export.matrix import calibrate
    from attn_yolo.export.runtime import latency_ms, open_runtime
    from attn_yolo.export.verify import verify_engine, verify_openvino
    from attn_yolo.markdown import table

    rows, ok = [], True
    for label, yaml_path in models.items():
        t0 = time.perf_counter()
        try:
            torch.manual_seed(0)
            y = YOLO(str(yaml_path))
            calibrate(y, imgsz)
            pt = out / f"{Path(yaml_path).stem}-deploy.pt"
            y.save(str(pt))
            if fmt == "engine":
                from attn_yolo.export.tensorrt_export import export_engine

                f = export_engine(pt, imgsz, half=True, out=pt.with_suffix(".engine"), overwrite=True)
                report = verify_engine(f, pt, device=device)
            else:
                from attn_yolo.export.openvino_export import export_openvino

                f = export_openvino(pt, imgsz, half=True, out=out / f"{pt.stem}_openvino_model", overwrite=True)
                report = verify_openvino(f, pt)
            report.save(overwrite=True)
            x = np.random.default_rng(0).random((1, 3, imgsz, imgsz), dtype=np.float32)
            ms = latency_ms(open_runtime(fmt, f, "fp16"), x, repeats, 5)
            t_pt = latency_ms(TorchRunner(YOLO(str(pt)).model, x, device), x, repeats, 5)
            ran = len(report.checks) - len(report.not_run)
            raw = max((c.value for c in report.checks if c.name == "raw" and c.value is not None), default=None)
            nms = sum(c.detail.get("matched", 0) for c in report.checks if c.name == "nms")
            verdict = f"{'PASS' if report.passed else 'FAIL'} {ran - len(report.failures)}/{ran}"
            verdict += f", {len(report.not_run)} not run" if report.not_run else ""
            problem = "" if report.passed else report.summary().splitlines()[-1][:200]
        except Exception as e:  # report and go on with the other model
            verdict, raw, nms, ms, t_pt = "FAIL", None, None, None, None
            problem = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        ok &= verdict.startswith("PASS")
        rows.append([label, f"{fmt} fp16", imgsz, verdict, _f(raw, 6), nms, _f(ms, 2), _f(t_pt, 2),
                     f"{time.perf_counter() - t0:.0f}", problem or "pass"])  # fmt: skip
    head = ["model", "format", "imgsz", "verification", "worst raw rel", "NMS matched", "latency ms",
            "PyTorch fp32 ms", "wall s", "check"]
    return table(head, rows), ok


def amp_dtypes_torch() -> list[str]:
    """``amp_dtypes`` as torch dtype names."""
    return [{"fp16": "float16", "bf16": "bfloat16"}[d] for d in amp_dtypes()]


def _f(v, dec: int = 4):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{dec}f}"


def main(argv: list[str]) -> int:
    from attn_yolo.args import UsageError, kv_args

    try:
        opts = kv_args(argv, {"out": None}, "gpu_check")
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device (torch {torch.__version__}, built for CUDA {torch.version.cuda}, "
              f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); run it on a machine with an "
              "NVIDIA GPU", file=sys.stderr)  # fmt: skip
        return 2
    import ultralytics

    from attn_yolo.synthetic import default_data_yaml

    t_start = time.perf_counter()
    out = Path(opts["out"] or tempfile.mkdtemp(prefix="attn-yolo-gpu-check-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(0)
    cap = ".".join(map(str, torch.cuda.get_device_capability(0)))
    mem = torch.cuda.get_device_properties(0).total_memory / 2**30
    data = str(default_data_yaml())
    sections, all_ok = [], True
    for title, fn in (
        ("SDPA backends: MHSA(128, heads=4), autocast, median of 10", lambda: sdpa_section("cuda")),
        ("Ultralytics' attention stock vs fused (sdpa): yolo11n, yolo12n, batch 2, autocast, median of 10",
         lambda: ultralytics_attention_section("cuda", dtypes=tuple(amp_dtypes_torch()))),
        ("AMP training: 1 epoch on synthetic-shapes (1000 images, 128 px)",
         lambda: amp_training_section("0", data, out, amp_dtypes())),
        ("Ablation: yolo11n vs + CBAM, 1 seed, 1 epoch, devices: [0]", lambda: ablation_section("0", data, out)),
        ("TensorRT FP16 engines verified against PyTorch on CUDA, batch 1 at 640",
         lambda: deploy_section("cuda:0", out)),
    ):  # fmt: skip
        t0 = time.perf_counter()
        body, ok = fn()
        all_ok &= ok
        sections.append(f"### {title} ({'pass' if ok else 'FAIL'}, {time.perf_counter() - t0:.0f} s)\n\n{body}\n")
    print("\n\n## GPU check (`scripts/gpu_check.py`)\n")
    print(f"{name} (compute capability {cap}, {mem:.0f} GiB), torch {torch.__version__} (CUDA {torch.version.cuda}), "
          f"ultralytics {ultralytics.__version__}, {time.strftime('%Y-%m-%d')}; total "
          f"{time.perf_counter() - t_start:.0f} s; result: {'pass' if all_ok else 'FAIL'}\n")
    print("\n".join(sections))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
