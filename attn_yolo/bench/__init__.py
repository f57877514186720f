"""Benchmarks: fused vs explicit attention, the cost of every block on a detector, reference implementations.

    attn-yolo bench                          # full run (about 10 min on 2 CPU cores): tables, BENCHMARKS.md
    attn-yolo bench quick=True               # smoke run of every code path (tiny sizes, 1-2 repeats); writes no file
    attn-yolo bench sections=attention tokens=1600,6400 out=/tmp/attn.md
    python scripts/bench.py ...              # the same

Sections (``sections=``, comma-separated):

1. ``attention``: the bare attention op ``(q, k, v) -> out`` (fused SDPA vs explicit ``softmax(QKᵀ/√d)V``) and the
   whole block (``MHSA(128, heads=4)`` fused, the same block with ``fused = False``, Ultralytics' ``Attention(128,
   num_heads=4, attn_ratio=1.0)``, the one in PSA/C2PSA, q/k/v head width 32 as ours) at N = H·W tokens, batch 1,
   fp32, forward (no grad) and forward+backward. Each case runs in a fresh subprocess (``isolate=True``): median
   latency (ms) after warm-up, extra peak resident memory over a baseline taken after building the inputs (MiB), and
   the attention kernel that actually ran, read from the profiler's op names. Each subprocess has an address-space
   limit (``mem_limit_gb``), so an ``N×N`` score matrix that does not fit fails with an error instead of swapping.
2. ``blocks``: yolo11n at ``imgsz``, batch 1, fused Conv+BN, eval: latency of each ``models/yolo11n-<block>.yaml``
   vs the baseline ``yolo11n.yaml`` in PyTorch and in onnxruntime (Ultralytics' ONNX exporter; exports cached),
   every model run once per round, round-robin, in one process; ratio = median over rounds of variant/baseline,
   with a distribution-free 95% CI; beside it the blocks' own time in the same runs (forward hooks on the blocks),
   the overhead without what the rest of the model does differently around them. Params and GFLOPs (Ultralytics'
   ``get_flops``) beside.
3. ``timm``: our SE, ECA and CBAM vs ``timm.layers`` SEModule, EcaModule, CbamModule carrying the same weights:
   max |difference| of the outputs (faithfulness, must be <= 1e-6) and the latency ratio ours/timm.
4. ``train``: training throughput (images/s) of each variant vs baseline: Ultralytics' detection loss
   forward+backward+SGD step on fixed random batches (``train_batch`` × 3 × ``train_imgsz``²), interleaved.
5. ``gpu``: when CUDA is present, which SDPA backends run (flash, memory-efficient, cuDNN, math, each forced with
   ``torch.nn.attention.sdpa_kernel``) and their time and ``torch.cuda.max_memory_allocated`` under fp16/bf16
   autocast; skipped with a note otherwise.
6. ``ultralytics``: Ultralytics' own attention (``Attention`` in yolo11n's C2PSA, ``AAttn`` in yolo12n's A2C2f) stock
   vs fused (``attn_yolo.fuse_attention``) at 640 and 1280 px, batch 2: forward and training-step time (interleaved
   rounds, paired medians), extra peak memory and the kernels that ran, each model and size in a fresh subprocess;
   then each layer alone around the CPU thresholds ``attn_yolo.sdpa.CPU_MIN_TOKENS`` (where SDPA wins).

One module per section (``attention``, ``blocks``, ``timm_compare``, ``train``, ``gpu``, ``ultralytics_attn``),
shared timing and memory
tools in ``common``, the report in ``report``; the variants of sections 2 and 4 are the table ``blocks.VARIANTS``.

Every ratio is computed from timings taken in the same run. ``BENCHMARKS.md`` records machine, versions, thread count,
date and each section's targets (its ``Section.targets`` rows: a threshold such as "SE overhead on yolo11n at 640
<= 3%", the figure measured, the status) in one table.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from pathlib import Path

import torch

from attn_yolo.args import Key, Schema, UsageError
from attn_yolo.bench.attention import attention_section
from attn_yolo.bench.blocks import VARIANTS, blocks_section
from attn_yolo.bench.common import SMOKE_WARNING, Section, default_mem_limit_gb
from attn_yolo.bench.gpu import gpu_section
from attn_yolo.bench.report import has_regions, quick_table, report, write_regions
from attn_yolo.bench.timm_compare import timm_section
from attn_yolo.bench.train import train_section
from attn_yolo.bench.ultralytics_attn import ultralytics_section
from attn_yolo.files import atomic_write

RUNNERS = {  # section name (``sections=``) → its runner: cfg → Section, one module each
    "attention": attention_section,
    "blocks": blocks_section,
    "timm": timm_section,
    "train": train_section,
    "gpu": gpu_section,
    "ultralytics": ultralytics_section,
}
SECTIONS = tuple(RUNNERS)
def _stride_multiple(v) -> str | None:
    return None if v is None or v % 32 == 0 else "a multiple of 32 (the detector's max stride)"


SCHEMA = Schema([  # default None: taken from FULL or QUICK below
    Key("quick", "bool", False, help="smoke run of every code path: tiny sizes, 1-2 repeats, no report file unless "
        "out="),
    Key("sections", "list", ",".join(SECTIONS), help="the sections to run", choices=SECTIONS),
    Key("variants", "list", ",".join(VARIANTS), help="blocks for sections 2 and 4 (models/yolo11-<block>.yaml)",
        choices=VARIANTS),
    Key("tokens", "any", help="N = H·W token counts (perfect squares, comma-separated) for sections 1 and 5"),
    Key("repeats", "int", help="timed runs per case (median), sections 1 and 5; section 3 uses 5× as many", low=1),
    Key("warmup", "int", 1, help="untimed runs before timing, section 1 (the first one is profiled for the kernel "
        "name)", low=0),
    Key("case_budget_s", "float", help="a pass whose run exceeds case_budget_s / repeats gets fewer repeats (at "
        "least 3; column n), s", low=0),
    Key("mem_limit_gb", "float", 0, help="address-space limit per attention case over its baseline, GiB; 0: half of "
        "available RAM (<= 16)", low=0),
    Key("isolate", "bool", True, help="section 1: each case in a fresh subprocess (honest peak memory); False: all in "
        "this process"),
    Key("imgsz", "imgsz", help="section 2 image size (targets are at 640)", check=_stride_multiple),
    Key("rounds", "int", help="section 2: round-robin rounds (one run of every model per round)", low=1),
    Key("onnx", "bool", True, help="section 2: also onnxruntime latency (Ultralytics ONNX export, cached under cache)"),
    Key("openvino", "bool", True, help="section 2: also OpenVINO CPU latency (Ultralytics OpenVINO export, cached "
        "under cache)"),
    Key("train_imgsz", "imgsz", help="section 4 image size", check=_stride_multiple),
    Key("train_batch", "int", help="section 4 batch size", low=1),
    Key("train_iters", "int", help="section 4 timed steps per model (after one warm-up step)", low=1),
    Key("ultra_rounds", "int", help="section 6: rounds per model, size and pass (each runs stock and fused); 4x as "
        "many per layer", low=1),
    Key("threads", "int", 0, help="torch and onnxruntime intra-op threads; 0: every core this process may use", low=0),
    Key("cache", "str", "", help="ONNX export cache folder; '': <tmp>/attn-yolo-bench"),
    Key("out", "path", help="Markdown report; default: BENCHMARKS.md in a full run, none in a quick run; '': none"),
])
"""``attn-yolo bench`` keys."""
DEFAULTS = SCHEMA.defaults()
FULL = {
    "tokens": (400, 1600, 6400, 25600),
    "repeats": 10,
    "case_budget_s": 90,
    "imgsz": 640,
    "rounds": 30,
    "train_imgsz": 320,
    "train_batch": 8,
    "train_iters": 8,
    "ultra_rounds": 5,
}
QUICK = {
    "tokens": (64, 256),
    "repeats": 2,
    "case_budget_s": 30,
    "imgsz": 160,
    "rounds": 2,
    "train_imgsz": 64,
    "train_batch": 2,
    "train_iters": 1,
    "ultra_rounds": 1,
}


def _as_list(value, key: str, allowed=None, cast=str) -> tuple:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    try:
        out = tuple(cast(str(v).strip()) for v in items if str(v).strip())
    except ValueError as e:
        raise UsageError(f"attn-yolo bench: {key}={value!r}: {e}") from None
    bad = [v for v in out if allowed is not None and v not in allowed]
    if bad or not out:
        raise UsageError(f"attn-yolo bench: {key}={value!r}: allowed values {', '.join(map(str, allowed or ()))}")
    return out


def available_cores() -> int:
    """CPU cores this process may run on. (Importing Ultralytics sets ``OMP_NUM_THREADS=1`` when unset, which makes
    torch default to one thread, so the bench sets its thread count explicitly.)"""
    with contextlib.suppress(AttributeError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parse_args(argv: list[str]) -> dict:
    """``key=value`` arguments → configuration (quick/full presets filled in, values validated)."""
    cfg = SCHEMA.parse(argv, "bench")
    for k, v in (QUICK if cfg["quick"] else FULL).items():
        if cfg[k] is None:
            cfg[k] = v
    cfg["tokens"] = _as_list(cfg["tokens"], "tokens", cast=int)
    bad = [n for n in cfg["tokens"] if n < 1 or math.isqrt(n) ** 2 != n]
    if bad:
        raise UsageError(f"attn-yolo bench: tokens={bad}: each N must be a perfect square (an H×W map with H = W), "
                         "e.g. 400, 1600, 6400, 25600")
    cfg["threads"] = cfg["threads"] or available_cores()
    if not isinstance(cfg["mem_limit_gb"], (int, float)) or cfg["mem_limit_gb"] < 0:
        raise UsageError(f"attn-yolo bench: mem_limit_gb={cfg['mem_limit_gb']!r}: expected a number >= 0 (0: auto)")
    cfg["mem_limit_gb"] = cfg["mem_limit_gb"] or default_mem_limit_gb()
    cfg["cache"] = cfg["cache"] or str(Path(tempfile.gettempdir()) / "attn-yolo-bench")
    if cfg["out"] is None:
        cfg["out"] = "" if cfg["quick"] else "BENCHMARKS.md"
    return cfg


def run(cfg: dict, argv: list[str] | None = None) -> tuple[list[Section], str]:
    """Run the configured sections; return them and the Markdown report (also written to ``cfg["out"]`` if set)."""
    torch.set_num_threads(cfg["threads"])
    t0 = time.perf_counter()
    sections = []
    if cfg["quick"]:
        print(f"attn-yolo bench: {SMOKE_WARNING.strip('*')}", flush=True)
    for name in cfg["sections"]:
        print(f"attn-yolo bench: {name} ...", flush=True)
        torch.set_num_threads(cfg["threads"])  # Ultralytics' select_device (export, trainer) resets it
        ts = time.perf_counter()
        s = RUNNERS[name](cfg)
        s.seconds, s.smoke = time.perf_counter() - ts, bool(cfg["quick"])
        if not cfg["quick"]:  # a quick run: one short table at the end
            print("\n" + s.markdown(), flush=True)
        sections.append(s)
    text = report(sections, cfg, argv or [], time.perf_counter() - t0)
    if cfg["quick"]:
        print("\n" + quick_table(sections, time.perf_counter() - t0, cfg["out"]), flush=True)
    if cfg["out"] and has_regions(cfg["out"]):  # BENCHMARKS.md: each section into its own region, the rest kept
        write_regions(cfg["out"], dict(zip(cfg["sections"], sections)), cfg, argv or [])
        print(f"attn-yolo bench: updated the sections {', '.join(cfg['sections'])} of {cfg['out']} "
              f"({(time.perf_counter() - t0) / 60:.1f} min)")
    elif cfg["out"]:
        atomic_write(cfg["out"], lambda p: Path(p).write_text(text + "\n"))
        print(f"attn-yolo bench: wrote {cfg['out']} ({(time.perf_counter() - t0) / 60:.1f} min)")
    return sections, text


def main(argv: list[str]) -> int:
    """``attn-yolo bench key=value ...``; ``attn-yolo bench help`` prints the keys."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(__doc__)
        print("Keys (key=default; None: the full/quick preset):")
        for k in SCHEMA:
            preset = f" [full: {FULL[k.name]}, quick: {QUICK[k.name]}]" if k.name in FULL else ""
            print(f"  {k.name}={k.default}{preset}  {k.help} ({k.allowed})")
        return 0
    cfg = parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    run(cfg, argv)
    return 0
