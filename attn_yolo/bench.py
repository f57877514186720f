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
   every model run once per round, round-robin, in one process; ratio = median over rounds of variant/baseline.
   Params and GFLOPs (Ultralytics' ``get_flops``) beside.
3. ``timm``: our SE, ECA and CBAM vs ``timm.layers`` SEModule, EcaModule, CbamModule carrying the same weights:
   max |difference| of the outputs (faithfulness, must be <= 1e-6) and the latency ratio ours/timm.
4. ``train``: training throughput (images/s) of each variant vs baseline: Ultralytics' detection loss
   forward+backward+SGD step on fixed random batches (``train_batch`` × 3 × ``train_imgsz``²), interleaved.
5. ``gpu``: when CUDA is present, which SDPA backends run (flash, memory-efficient, cuDNN, math, each forced with
   ``torch.nn.attention.sdpa_kernel``) and their time and ``torch.cuda.max_memory_allocated`` under fp16/bf16
   autocast; skipped with a note otherwise.

Every ratio is computed from timings taken in the same run. ``BENCHMARKS.md`` records machine, versions, thread count,
date and the targets of the benchmark issue with their status.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import hashlib
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from attn_yolo.args import UsageError, kv_args

C, HEADS = 128, 4  # attention benchmark: 4 heads × head width 32
ULTRA_ATTN_RATIO = 1.0  # Ultralytics Attention(128, 4, attn_ratio=1.0): key_dim = head_dim = 32 for q, k and v
SECTIONS = ("attention", "blocks", "timm", "train", "gpu")
VARIANTS = ("se", "eca", "sam", "cbam", "mhsa")
ATTN_KINDS = {  # case name → (level, label)
    "sdpa": ("op", "fused SDPA (F.scaled_dot_product_attention)"),
    "explicit": ("op", "explicit softmax(QKᵀ/√d)V (MHSA.attend, fused=False)"),
    "mhsa": ("block", "MHSA(128, heads=4), fused"),
    "mhsa_explicit": ("block", "MHSA(128, heads=4), fused=False"),
    "ultra": ("block", "Ultralytics Attention(128, 4, attn_ratio=1.0)"),
}
PASSES = ("fwd", "fwdbwd")
MIN_REPEATS = 3  # a case whose single run exceeds case_budget_s / repeats runs this many times at least
TIMM_NOISE = 1.05  # "ours no slower than timm": ratio <= this (identical op sequences; 5 % = interleaved-median noise)
RESULT_MARK = "ATTN_YOLO_BENCH_RESULT "
MIB = 2**20

DEFAULTS = {  # None: taken from FULL or QUICK below
    "quick": False,
    "sections": ",".join(SECTIONS),
    "variants": ",".join(VARIANTS),
    "tokens": None,
    "repeats": None,
    "warmup": 1,
    "case_budget_s": None,
    "mem_limit_gb": 0,
    "isolate": True,
    "imgsz": None,
    "rounds": None,
    "onnx": True,
    "train_imgsz": None,
    "train_batch": None,
    "train_iters": None,
    "threads": 0,
    "cache": "",
    "out": None,
}
KEY_HELP = {
    "quick": "smoke run of every code path: tiny sizes, 1-2 repeats, no report file unless out=",
    "sections": f"comma-separated subset of {','.join(SECTIONS)}",
    "variants": f"blocks for sections 2 and 4 (models/yolo11-<block>.yaml), subset of {','.join(VARIANTS)}",
    "tokens": "N = H·W token counts (perfect squares) for sections 1 and 5",
    "repeats": "timed runs per case (median), sections 1 and 5; section 3 uses 5× as many",
    "warmup": "untimed runs before timing, section 1 (the first one is profiled for the kernel name)",
    "case_budget_s": "a pass whose run exceeds case_budget_s / repeats gets fewer repeats (at least 3; column n)",
    "mem_limit_gb": "address-space limit per attention case over its baseline; 0: half of available RAM (<= 16)",
    "isolate": "section 1: each case in a fresh subprocess (honest peak memory); False: all in this process",
    "imgsz": "section 2 image size (targets are at 640)",
    "rounds": "section 2: round-robin rounds (one run of every model per round)",
    "onnx": "section 2: also onnxruntime latency (Ultralytics ONNX export, cached under cache)",
    "train_imgsz": "section 4 image size",
    "train_batch": "section 4 batch size",
    "train_iters": "section 4 timed steps per model (after one warm-up step)",
    "threads": "torch and onnxruntime intra-op threads; 0: every core this process may use",
    "cache": "ONNX export cache folder; '': <tmp>/attn-yolo-bench",
    "out": "Markdown report; None: BENCHMARKS.md in a full run, none in a quick run; '': none",
}
FULL = {
    "tokens": (400, 1600, 6400, 25600),
    "repeats": 10,
    "case_budget_s": 90,
    "imgsz": 640,
    "rounds": 30,
    "train_imgsz": 320,
    "train_batch": 8,
    "train_iters": 8,
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
}
TIMM_SHAPES = {False: ((1, 64, 80, 80), (16, 256, 40, 40)), True: ((1, 64, 20, 20), (2, 256, 10, 10))}  # by quick
OVERHEAD_TARGETS = {"eca": 0.03, "se": 0.03, "sam": 0.05, "cbam": 0.08, "mhsa": 0.10}  # max latency overhead at 640
OVERHEAD_HINTS = {
    "se": "two pooled 1×1 convs per stage; overhead is the extra full-tensor multiply x·s (memory-bound)",
    "eca": "as SE: the full-tensor multiply x·s dominates; a fused mul into the next conv would remove it",
    "sam": "channel mean+max and a 7×7 conv over the P3 map (80×80) are memory-bound passes; k=3 or P4/P5 only",
    "cbam": "two gates = two full-tensor multiplies plus SAM's passes; drop it from P3 or use k=3",
    "mhsa": "400 tokens at P5 are cheap; the cost is the MLP (C→2C→C) and LayerNorms; mlp_ratio=1 would halve it",
}


# ---------------------------------------------------------------------------------------------------------------- utils
@dataclass
class Section:
    """One benchmark section: its Markdown body, target checks and run time."""

    title: str
    body: list[str] = field(default_factory=list)
    targets: list[tuple[str, str, str, str]] = field(default_factory=list)  # (target, measured, status, note)
    seconds: float = 0.0

    def markdown(self) -> str:
        return "\n".join([f"## {self.title}", "", *self.body, "", f"_Section time: {self.seconds:.0f} s._", ""])


def md_table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table; ``None`` cells print as an em dash, ``|`` inside a cell is escaped."""
    cell = lambda v: "—" if v is None else str(v).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join([*lines, *("| " + " | ".join(cell(v) for v in r) + " |" for r in rows)])


def fmt(v: float | None, digits: int = 3) -> str | None:
    """``v`` with ``digits`` significant digits (no exponent for ordinary magnitudes); None stays None."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    return f"{v:.{max(0, digits - 1 - mag)}f}"


def ratio(a: float | None, b: float | None, floor: float = 0.0) -> float | None:
    """``a / b``, or None when either is missing or ``b <= floor``."""
    return None if a is None or b is None or b <= floor else a / b


def timed(fn) -> float:
    """Seconds taken by one call of ``fn`` (after a CUDA sync when CUDA is in use)."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() and torch.cuda.is_initialized() else (lambda: None)
    sync()
    t = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t


def interleaved_times(fns: dict, rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Time every callable once per round, round-robin (start rotated each round), after ``warmup`` untimed rounds.

    Interleaving spreads slow phases of a shared or throttling machine over all candidates, so their ratios are
    stable where separate runs are not.

    Returns:
        dict: name → list of ``rounds`` durations in seconds.
    """
    names, out = list(fns), {k: [] for k in fns}
    for r in range(warmup + rounds):
        for i in range(len(names)):
            name = names[(i + r) % len(names)]
            t = timed(fns[name])
            if r >= warmup:
                out[name].append(t)
    return out


def paired_ratio(times: list[float], base: list[float]) -> float:
    """Median over rounds of ``times[i] / base[i]`` (both from the same round of ``interleaved_times``)."""
    return statistics.median(t / b for t, b in zip(times, base))


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


# --------------------------------------------------------------------------------------------------- kernel detection
SDPA_KERNELS = {  # profiler op name (forward; "<name>_backward" for backward) → label
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cuDNN",
    "aten::_scaled_dot_product_fused_attention_overrideable": "fused (overrideable)",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math (MPS)",
}


def attention_kernel(op_names) -> str:
    """Name the attention kernel(s) found among profiler op names.

    SDPA's dispatch picks one implementation per call and records it as its own op (table ``SDPA_KERNELS``), so a
    silent fallback to the math kernel shows up as ``math``. Without any SDPA op, ``softmax`` plus a matrix product
    means an explicit ``softmax(QKᵀ)V``.

    Returns:
        str: e.g. ``"flash (CPU)"``, ``"flash (CPU); bwd: flash (CPU)"``, ``"explicit (matmul + softmax)"``, ``"none"``.
    """
    names = set(op_names)
    fwd = [label for op, label in SDPA_KERNELS.items() if op in names]
    bwd = [label for op, label in SDPA_KERNELS.items() if op + "_backward" in names]
    if fwd or bwd:
        return " + ".join(fwd) + (f"; bwd: {' + '.join(bwd)}" if bwd else "")
    if names & {"aten::softmax", "aten::_softmax"} and names & {"aten::matmul", "aten::bmm", "aten::baddbmm"}:
        return "explicit (matmul + softmax)"
    return "none"


def profile_kernel(fn) -> str:
    """Run ``fn`` once under ``torch.profiler`` (stderr silenced) and return ``attention_kernel`` of the ops it ran."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()  # CPU cases never start a CUDA context
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with _quiet_stderr(), profile(activities=acts) as prof:
        fn()
    return attention_kernel(e.name for e in prof.events())


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (Kineto prints ``profiler_start/stop`` lines there on every profile)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved), os.close(null)


# ------------------------------------------------------------------------------------------------------- peak memory
def _proc_status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class PeakMemory:
    """Extra peak resident memory (MiB) of this process during a code region, over its resident memory at ``start``.

    On Linux the kernel's high-water mark ``VmHWM`` is reset to the current RSS at ``start`` (``/proc/self/clear_refs``,
    value 5) and read at ``peak_mib``; the same counter as ``getrusage(RUSAGE_SELF).ru_maxrss``, but restartable per
    region, so neither the import of torch nor the parent process's size (inherited by ``ru_maxrss`` across
    fork/exec) hides a small peak. Elsewhere it falls back to the ``ru_maxrss`` delta (``method`` says which).
    """

    def __init__(self):
        self.method = "VmHWM" if self._reset() else "ru_maxrss"
        self.base_kib = 0

    @staticmethod
    def _reset() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return _proc_status_kib("VmHWM") is not None
        except OSError:
            return False

    @staticmethod
    def _maxrss_kib() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r / 1024 if sys.platform == "darwin" else r  # bytes on macOS, KiB on Linux

    def start(self) -> None:
        gc.collect()
        if self.method == "VmHWM":
            self._reset()
            self.base_kib = _proc_status_kib("VmRSS")
        else:
            self.base_kib = self._maxrss_kib()

    def peak_mib(self) -> float:
        now = _proc_status_kib("VmHWM") if self.method == "VmHWM" else self._maxrss_kib()
        return max(0.0, (now - self.base_kib) / 1024)


@contextlib.contextmanager
def address_space_limit(nbytes: int | None):
    """Limit this process's address space to its current size + ``nbytes`` (``RLIMIT_AS``); restore on exit.

    An allocation beyond it fails inside PyTorch (``RuntimeError: ... can't allocate memory``) instead of pushing a
    machine without swap into the OOM killer.
    """
    vm_kib = _proc_status_kib("VmSize")
    if not nbytes or vm_kib is None:
        yield
        return
    old = resource.getrlimit(resource.RLIMIT_AS)
    new = vm_kib * 1024 + int(nbytes)
    if old[1] != resource.RLIM_INFINITY:
        new = min(new, old[1])
    resource.setrlimit(resource.RLIMIT_AS, (new, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


def default_mem_limit_gb() -> float:
    """Half the memory available now (``MemAvailable``), at most 16 GiB; 8 GiB if unknown."""
    try:
        import psutil

        return min(16.0, psutil.virtual_memory().available / 2**30 / 2)
    except ImportError:
        kib = None
        with contextlib.suppress(OSError), open("/proc/meminfo") as f:
            kib = next((int(line.split()[1]) for line in f if line.startswith("MemAvailable:")), None)
        return min(16.0, kib / 2**20 / 2) if kib else 8.0


def _short_error(e: BaseException, limit_bytes: int | None) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    m = re.search(r"allocate (\d+) bytes", msg)
    if isinstance(e, MemoryError) or m or "can't allocate memory" in msg or "out of memory" in msg.lower():
        tried = f"tried to allocate {int(m.group(1)) / 2**30:.2f} GiB" if m else "allocation failed"
        lim = f"; limit {limit_bytes / 2**30:.1f} GiB over baseline" if limit_bytes else ""
        return f"out of memory ({tried}{lim})"
    return f"{type(e).__name__}: {msg[:200]}"


# ------------------------------------------------------------------------------------------ section 1: attention cases
def attention_inputs(kind: str, n: int, seed: int = 0):
    """The module and input of one attention case at ``n`` tokens: ``(module, inputs tuple)``."""
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"tokens={n} is not a perfect square (H = W = sqrt(N) feature map)")
    torch.manual_seed(seed)
    if kind == "ultra":
        from ultralytics.nn.modules.block import Attention

        m = Attention(C, num_heads=HEADS, attn_ratio=ULTRA_ATTN_RATIO)
    else:
        from attn_yolo.nn import MHSA

        m = MHSA(C, heads=HEADS)
        m.fused = kind in ("sdpa", "mhsa")
    m.eval()  # eval in both passes: Ultralytics' BN uses running stats; MHSA has no dropout (attn_drop=0)
    if ATTN_KINDS[kind][0] == "op":
        d = C // HEADS
        return m, tuple(torch.randn(1, HEADS, n, d) for _ in range(3))
    return m, (torch.randn(1, C, side, side),)


def attention_call(kind: str, m: nn.Module, inputs: tuple, pass_: str, ctx=contextlib.nullcontext):
    """A zero-argument callable running one pass (``fwd`` no-grad, or ``fwdbwd``) of an attention case.

    ``ctx``: context-manager factory around the forward only (e.g. autocast; backward runs outside it).
    """
    op = ATTN_KINDS[kind][0] == "op"
    run = (lambda *a: m.attend(*a)[0]) if op else m
    if pass_ == "fwd":

        def fwd():
            with torch.no_grad(), ctx():
                run(*inputs)

        return fwd
    grads = [t.requires_grad_() for t in inputs] if op else list(m.parameters())

    def fwdbwd():
        for t in grads:
            t.grad = None
        with ctx():
            y = run(*inputs)
        y.float().sum().backward()

    return fwdbwd


def run_attention_case(
    kind: str,
    n: int,
    passes=PASSES,
    repeats: int = 10,
    warmup: int = 1,
    case_budget_s: float | None = None,
    threads: int = 0,
    mem_limit_bytes: int | None = None,
) -> dict:
    """Time and measure one attention case in this process (``bench_attention_case`` runs it in a fresh one).

    Order: build module and inputs; run the case once at 64 tokens (loads code paths and thread pools); reset the
    peak-memory mark (baseline); then per pass: one profiled warm-up run (kernel name), ``warmup - 1`` more, and
    ``repeats`` timed runs. A pass that fails (e.g. out of memory under ``mem_limit_bytes``) records the error and
    the remaining passes are skipped.

    Returns:
        dict: ``{"n", "kind", "memory_method", pass: {"ms", "times_ms", "repeats", "peak_mib", "kernel", "error"}}``.
    """
    if threads:
        torch.set_num_threads(threads)
    m, inputs = attention_inputs(kind, n)
    sm, small = attention_inputs(kind, 64, seed=1)
    for p in passes:  # profiled too: the profiler's first use allocates ~100 MiB that must precede the baseline
        profile_kernel(attention_call(kind, sm, small, p))
    del sm, small
    mem = PeakMemory()
    out = {"n": n, "kind": kind, "memory_method": mem.method, "threads": torch.get_num_threads()}
    failed = None
    for p in passes:
        if failed:
            out[p] = {"error": f"not run ({failed} failed)"}
            continue
        fn = attention_call(kind, m, inputs, p)
        res = {"error": None}
        mem.start()
        with address_space_limit(mem_limit_bytes):
            try:
                t0 = time.perf_counter()
                res["kernel"] = profile_kernel(fn)
                first = time.perf_counter() - t0
                for _ in range(warmup - 1):
                    fn()
                reps = repeats
                if case_budget_s and first * repeats > case_budget_s:
                    reps = max(MIN_REPEATS, min(repeats, int(case_budget_s / first)))
                times = [timed(fn) for _ in range(reps)]
                res.update(ms=median_ms(times), times_ms=[t * 1e3 for t in times], repeats=reps)
            except (RuntimeError, MemoryError) as e:
                res["error"] = _short_error(e, mem_limit_bytes)
                failed = p
            finally:
                gc.collect()
        res["peak_mib"] = mem.peak_mib()
        out[p] = res
    return out


def _worker(spec_json: str) -> None:
    """Subprocess entry: run ``run_attention_case(**spec)`` and print its result as one JSON line."""
    try:
        res = run_attention_case(**json.loads(spec_json))
    except BaseException as e:  # noqa: BLE001  report, never hang the parent
        res = {"error": f"{type(e).__name__}: {e}"}
    print(RESULT_MARK + json.dumps(res), flush=True)


def bench_attention_case(spec: dict, isolate: bool = True, timeout_s: float = 900) -> dict:
    """Run one attention case, in a fresh Python subprocess when ``isolate`` (honest peak memory), else in process.

    A subprocess that dies (signal, timeout) yields ``{"error": ...}`` rather than an exception.
    """
    if not isolate:
        return run_attention_case(**spec)
    code = "import sys; from attn_yolo.bench import _worker; _worker(sys.argv[1])"
    env = {**os.environ, "YOLO_OFFLINE": "1", "KINETO_LOG_LEVEL": "5"}
    try:
        p = subprocess.run(
            [sys.executable, "-c", code, json.dumps(spec)], capture_output=True, text=True, timeout=timeout_s, env=env
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith(RESULT_MARK)), None)
    if line is None:
        why = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit code {p.returncode}"
        tail = (p.stderr.strip().splitlines() or [""])[-1][:200]
        return {"error": f"subprocess {why} (out of memory?) {tail}".strip()}
    return json.loads(line[len(RESULT_MARK) :])


def attention_section(cfg: dict) -> Section:
    """Section 1: bare op and whole block, fused vs explicit vs Ultralytics, per token count and pass."""
    s = Section("1. Attention kernel: fused SDPA vs explicit softmax(QKᵀ)V")
    limit = int(cfg["mem_limit_gb"] * 2**30)
    results = {}
    for n in cfg["tokens"]:
        for kind in ATTN_KINDS:
            spec = dict(
                kind=kind,
                n=n,
                repeats=cfg["repeats"],
                warmup=cfg["warmup"],
                case_budget_s=cfg["case_budget_s"],
                threads=cfg["threads"],
                mem_limit_bytes=limit,
            )
            r = results[kind, n] = bench_attention_case(spec, isolate=cfg["isolate"])
            brief = [f"{p}: {fmt((r.get(p) or {}).get('ms')) or (r.get(p) or r).get('error')}" for p in PASSES]
            print(f"  attention {kind:<14} N={n:<6} " + "  ".join(brief), flush=True)
    method = next((r["memory_method"] for r in results.values() if "memory_method" in r), "?")
    where = "each case in a fresh subprocess" if cfg["isolate"] else "all cases in one process (isolate=False)"
    s.body += [
        f"CPU, {cfg['threads']} threads, fp32, batch 1, {HEADS} heads × head width {C // HEADS} (C = {C}), {where}; "
        f"median of {cfg['repeats']} runs (column n) after {cfg['warmup']} warm-up run(s). "
        f"**Extra peak** = peak resident memory during the pass minus the resident memory after building the inputs "
        f"({method}; address-space limit {cfg['mem_limit_gb']:.1f} GiB over that baseline). "
        "**Kernel** = the attention implementation the profiler saw run. Ratios (× fused) are the row's time or "
        "memory over the fused row of the same N and pass: > 1 means fused is faster / smaller.",
        "",
        "Ultralytics' `Attention` (PSA/C2PSA) with `dim=128, num_heads=4, attn_ratio=1.0` gives q, k and v head "
        "width 32 like ours (its default 0.5 halves q/k). It is a smaller block than MHSA: qkv 1×1 conv, explicit "
        "attention, depthwise 3×3 on v, proj; MHSA adds LayerNorms, a 3×3 position conv and an MLP (C→2C→C).",
        "",
    ]
    for level, title in (("op", "Bare attention op: (q, k, v) → out, each (1, 4, N, 32)"), ("block", "Whole block")):
        rows = []
        for n in cfg["tokens"]:
            side = math.isqrt(n)
            for p in PASSES:
                ref = (results["sdpa" if level == "op" else "mhsa", n].get(p)) or {}
                for kind, (lv, label) in ATTN_KINDS.items():
                    if lv != level:
                        continue
                    r = results[kind, n].get(p) or {"error": results[kind, n].get("error")}
                    ms, mib = r.get("ms"), r.get("peak_mib")
                    fused = kind in ("sdpa", "mhsa")
                    rows.append(
                        [
                            f"{n} ({side}×{side})",
                            {"fwd": "forward", "fwdbwd": "fwd+bwd"}[p],
                            label,
                            r.get("kernel") or "—",
                            r.get("repeats"),
                            fmt(ms) if ms is not None else r.get("error"),
                            fmt(mib, 3),
                            None if fused else fmt(ratio(ms, ref.get("ms"))),
                            None if fused else fmt(ratio(mib if ms else None, ref.get("peak_mib"), 0.05)),
                        ]
                    )
        heads = ["N (map)", "pass", "implementation", "kernel", "n", "median ms", "extra peak MiB"]
        s.body += [f"### {title}", "", md_table([*heads, "time × fused", "memory × fused"], rows), ""]
    attention_targets(s, results, cfg["tokens"])
    return s


def attention_targets(s: Section, results: dict, tokens) -> None:
    """Add the issue's attention targets (N = 6400 forward, N = 25600 outcome, kernel visibility) to ``s``."""
    get = lambda k, n, p="fwd": results.get((k, n), {}).get(p) or {}  # noqa: E731
    n0 = 6400
    if n0 in tokens:
        f, e, u = get("mhsa", n0), get("mhsa_explicit", n0), get("ultra", n0)
        bo, be = get("sdpa", n0), get("explicit", n0)
        mem = ratio(e.get("peak_mib"), f.get("peak_mib"), 0.05)
        op_mem = ratio(be.get("peak_mib"), bo.get("peak_mib"), 0.05)
        note = f"bare op: {fmt(op_mem)}× ({fmt(bo.get('peak_mib'))} vs {fmt(be.get('peak_mib'))} MiB)"
        if _status(mem, 50) == "missed":
            note += (f". The fused block's own activations ({fmt(f.get('peak_mib'))} MiB: q, k, v and their (B, h, N, d) copies, "
                     "MLP hidden and GELU output, LayerNorm outputs, residual sums: ~10 N×C maps) set its floor, not "
                     "attention. Closing it: in-place residual adds under no_grad, the MLP chunked over tokens")
        s.targets.append(("MHSA fused vs explicit block, N=6400 fwd: memory ≥ 50× lower", f"{fmt(mem)}×",
                          _status(mem, 50), note))
        t = ratio(e.get("ms"), f.get("ms"))
        op_t = ratio(be.get("ms"), bo.get("ms"))
        note = f"bare op: {fmt(op_t)}×"
        if _status(t, 3) == "missed":
            note += "; the block's linear layers and MLP cost the same on both paths and dilute the ratio"
        s.targets.append(("MHSA fused vs explicit block, N=6400 fwd: ≥ 3× faster", f"{fmt(t)}×", _status(t, 3), note))
        t = ratio(u.get("ms"), f.get("ms"))
        note = "" if _status(t, 2.5) != "missed" else "Ultralytics' block is smaller (no MLP, no LayerNorm)"
        s.targets.append(("MHSA fused vs Ultralytics Attention, N=6400 fwd: ≥ 2.5× faster", f"{fmt(t)}×",
                          _status(t, 2.5), note))
    n1 = 25600
    if n1 in tokens:
        parts = []
        for k in ("explicit", "mhsa_explicit", "ultra"):
            for p in PASSES:
                r = get(k, n1, p)
                what = r.get("error") or f"{fmt(r.get('ms'))} ms, {fmt(r.get('peak_mib'))} MiB"
                parts.append(f"{k} {p}: {what}")
        s.targets.append(("N=25600 explicit paths (score matrix 2.5 GiB/head): report outcome", "; ".join(parts),
                          "reported", ""))
    kernels = {(k, n, p): get(k, n, p).get("kernel") for k in ("sdpa", "mhsa") for n in tokens for p in PASSES}
    bad = sorted({f"{k} N={n} {p}: {v}" for (k, n, p), v in kernels.items() if v and "flash" not in v})
    seen = sorted({v for v in kernels.values() if v})
    s.targets.append(("kernel that ran is reported; no silent math fallback", ", ".join(seen) or "—",
                      "met" if seen and not bad else "missed", "; ".join(bad)))


def _status(value: float | None, at_least: float) -> str:
    return "not measured" if value is None else ("met" if value >= at_least else "missed")


# ----------------------------------------------------------------------------------------- section 2: block overhead
def models_dir() -> Path:
    """The repository's ``models/`` folder (next to the ``attn_yolo`` package)."""
    return Path(__file__).resolve().parent.parent / "models"


def detector_yamls(variants, scale: str = "n") -> dict[str, str]:
    """``{"baseline": "yolo11n.yaml", "se": ".../models/yolo11n-se.yaml", ...}`` (Ultralytics reads the scale from
    the file name, so the ``n`` path resolves to ``models/yolo11-se.yaml``)."""
    out = {"baseline": f"yolo11{scale}.yaml"}
    for v in variants:
        f = models_dir() / f"yolo11-{v}.yaml"
        if not f.is_file():
            raise UsageError(f"attn-yolo bench: variant {v!r}: {f} not found; variants: {', '.join(VARIANTS)}")
        out[v] = str(f.with_name(f"yolo11{scale}-{v}.yaml"))
    return out


def build_detector(yaml: str):
    """``YOLO(yaml)``: a randomly initialised Ultralytics detector (quiet)."""
    import attn_yolo  # noqa: F401  registers the blocks
    from ultralytics import YOLO

    return YOLO(yaml, verbose=False)


BLOCK_SOURCES = ("build.py", "registry.py", "layer_scale.py", "se.py", "eca.py", "cbam.py", "mhsa.py")  # shape exports


def _cache_key(yaml: str, imgsz: int) -> str:
    """Hash of what shapes an export: versions, ``imgsz``, the YAML text and the attn_yolo sources."""
    import ultralytics

    h = hashlib.sha1(f"{ultralytics.__version__} {torch.__version__} {imgsz} {Path(yaml).name}".encode())
    src = models_dir() / re.sub(r"^yolo11[nslmx]-", "yolo11-", Path(yaml).name)
    if src.is_file():
        h.update(src.read_bytes())
    for f in BLOCK_SOURCES:
        h.update((Path(__file__).parent / f).read_bytes())
    return h.hexdigest()[:12]


def export_onnx_cached(yaml: str, imgsz: int, cache: Path) -> Path:
    """ONNX file of ``YOLO(yaml)`` at ``imgsz`` via ``attn_yolo.export.export_onnx`` (Ultralytics' exporter, opset
    checked), cached under ``cache`` by content hash. The exporter writes a YAML model's ``.onnx`` into the working
    directory, so it runs in a temporary directory inside ``cache``."""
    from attn_yolo.export import export_onnx

    cache.mkdir(parents=True, exist_ok=True)
    dst = cache / f"{Path(yaml).stem}-{imgsz}-{_cache_key(yaml, imgsz)}.onnx"
    if dst.is_file():
        return dst
    for old in cache.glob(f"{Path(yaml).stem}-{imgsz}-*.onnx"):  # stale exports of the same model
        old.unlink()
    with tempfile.TemporaryDirectory(dir=cache) as tmp, contextlib.chdir(tmp), _quiet_ultralytics():
        f = export_onnx(build_detector(yaml), imgsz=imgsz)
        shutil.move(str(Path(tmp) / f), dst)
    return dst


@contextlib.contextmanager
def _quiet_ultralytics():
    """Ultralytics' logger at WARNING (the exporter logs a dozen lines per model)."""
    from ultralytics.utils import LOGGER

    level = LOGGER.level
    LOGGER.setLevel("WARNING")
    try:
        yield
    finally:
        LOGGER.setLevel(level)


def blocks_section(cfg: dict) -> Section:
    """Section 2: latency overhead of each attention variant on yolo11n, PyTorch and onnxruntime, interleaved."""
    from ultralytics.utils.torch_utils import get_flops

    imgsz, rounds, threads = cfg["imgsz"], cfg["rounds"], cfg["threads"]
    s = Section(f"2. Block overhead on yolo11n at {imgsz} (batch 1)")
    yamls = detector_yamls(cfg["variants"])
    models, info = {}, {}
    for name, y in yamls.items():
        m = build_detector(y).model.eval()
        m.fuse(verbose=False)
        info[name] = (sum(p.numel() for p in m.parameters()), get_flops(m, imgsz))
        models[name] = m
    x = torch.rand(1, 3, imgsz, imgsz)
    torch.set_num_threads(threads)

    def pt(m):
        def run():
            with torch.no_grad():
                m(x)

        return run

    t_pt = interleaved_times({k: pt(m) for k, m in models.items()}, rounds)
    t_ort, ort_note = {}, ""
    if cfg["onnx"]:
        try:
            import numpy as np

            from attn_yolo.export import ort_session

            files = {k: export_onnx_cached(y, imgsz, Path(cfg["cache"])) for k, y in yamls.items()}
            torch.set_num_threads(threads)  # Ultralytics' exporter resets it (select_device)
            xn = np.random.default_rng(0).random((1, 3, imgsz, imgsz), dtype=np.float32)
            sessions = {}
            for k, f in files.items():
                sess = ort_session(f, threads)
                sessions[k] = (sess, {sess.get_inputs()[0].name: xn})
            t_ort = interleaved_times({k: (lambda s_=s_, f_=f_: s_.run(None, f_)) for k, (s_, f_) in sessions.items()},
                                      rounds)
            ort_note = (f"onnxruntime {__import__('onnxruntime').__version__}, CPU provider, {threads} intra-op "
                        f"threads; `attn_yolo.export.export_onnx` (Ultralytics' exporter) at {imgsz}, cached in "
                        f"`{cfg['cache']}`. Sessions (`attn_yolo.export.ort_session`) are driven round-robin like the "
                        "PyTorch runs (not `onnx_latency_ms`, which times one model alone), so ratios are paired.")
        except ImportError as e:
            ort_note = f"onnxruntime not measured: {e} (pip install 'attn-yolo[export]')"
    else:
        ort_note = "onnxruntime not measured (onnx=False)."
    rows = []
    for k in models:
        p, g = info[k]
        r_pt = paired_ratio(t_pt[k], t_pt["baseline"])
        r_ort = paired_ratio(t_ort[k], t_ort["baseline"]) if t_ort else None
        rows.append([k, f"{p / 1e6:.3f}", fmt(g), fmt(median_ms(t_pt[k])), fmt(r_pt),
                     fmt(median_ms(t_ort[k])) if t_ort else None, fmt(r_ort)])
        if k in OVERHEAD_TARGETS:
            lim = OVERHEAD_TARGETS[k]
            ok = ("met" if r_pt <= 1 + lim else "missed") if imgsz == 640 else "n/a (target is at 640)"
            s.targets.append((f"{k.upper()} overhead on yolo11n at {imgsz} ≤ {lim:.0%} (PyTorch)",
                              f"{r_pt - 1:+.1%} (ORT {r_ort - 1:+.1%})" if r_ort else f"{r_pt - 1:+.1%}", ok,
                              OVERHEAD_HINTS[k] if ok == "missed" else ""))
    s.body += [
        f"Fused (Conv+BN), eval, random weights, input 1×3×{imgsz}×{imgsz}, {threads} threads. Each "
        f"round runs every model once (round-robin, start rotated); {rounds} rounds after one warm-up round. "
        "Ratio = median over rounds of variant/baseline time from the same round. GFLOPs: Ultralytics' `get_flops` "
        f"at {imgsz}.",
        "",
        md_table(["model", "params (M)", "GFLOPs", "PyTorch ms", "PyTorch × baseline", "ORT ms", "ORT × baseline"],
                 rows),
        "",
        ort_note,
    ]
    return s


# ------------------------------------------------------------------------------------------------ section 3: timm
def timm_twin(block: nn.Module) -> nn.Module:
    """The ``timm.layers`` equivalent of our ``SE``, ``ECA`` or ``CBAM`` (no residual gate), carrying its weights.

    * ``SE`` → ``SEModule(C, rd_channels=hidden)`` (1×1 convs with bias, ReLU, sigmoid): same definition.
    * ``ECA`` → ``EcaModule(kernel_size=k)`` (timm's adaptive ``k`` is clamped to ``>= 3``; passing ``k`` avoids it).
    * ``CBAM`` → ``CbamModule(C, rd_channels=hidden, spatial_kernel_size=k, mlp_bias=True)``: same order (channel,
      then spatial on the channel-refined map), sigmoid gates, avg+max pooling in both. timm's spatial conv is a
      bias-free conv followed by BatchNorm; the BN is set to the identity plus our conv's bias (running mean 0,
      running var 1, eps 0, weight 1, bias = our bias), exact in eval mode.

    Raises:
        TypeError: for another block, or one built with ``init_values`` (timm has no residual gate).
    """
    from timm.layers import EcaModule, SEModule
    from timm.layers.cbam import CbamModule  # not re-exported by timm.layers

    from attn_yolo import CBAM, ECA, SE

    if getattr(block, "scale", None) is not None:
        raise TypeError("timm_twin: the block has a residual gate (init_values); timm's modules have none")
    if isinstance(block, SE):
        twin = SEModule(block.c1, rd_channels=block.hidden)
        pairs = [(twin.fc1, block.fc1), (twin.fc2, block.fc2)]
    elif isinstance(block, ECA):
        twin = EcaModule(kernel_size=block.k)
        pairs = [(twin.conv, block.conv)]
    elif isinstance(block, CBAM):
        twin = CbamModule(block.c1, rd_channels=block.channel.hidden, spatial_kernel_size=block.k, mlp_bias=True)
        pairs = [(twin.channel.fc1, block.channel.mlp[0]), (twin.channel.fc2, block.channel.mlp[2])]
        conv, bn = twin.spatial.conv.conv, twin.spatial.conv.bn
        with torch.no_grad():
            conv.weight.copy_(block.spatial.conv.weight)
            bn.running_mean.zero_(), bn.running_var.fill_(1.0), bn.weight.fill_(1.0)
            bn.bias.copy_(block.spatial.conv.bias)
        bn.eps = 0.0
    else:
        raise TypeError(f"timm_twin: no timm equivalent for {type(block).__name__} (SE, ECA, CBAM)")
    with torch.no_grad():
        for dst, src in pairs:
            dst.weight.copy_(src.weight)
            if src.bias is not None:
                dst.bias.copy_(src.bias)
    return twin.eval()


def timm_section(cfg: dict) -> Section:
    """Section 3: faithfulness (max |Δ|) and latency ratio of SE/ECA/CBAM vs timm.layers, interleaved."""
    from attn_yolo import CBAM, ECA, SE

    s = Section("3. Reference implementations: ours vs timm.layers")
    try:
        import timm
    except ImportError as e:
        s.body.append(f"Skipped: {e} (pip install 'attn-yolo[bench]').")
        return s
    rows, worst = [], {}
    for shape in TIMM_SHAPES[cfg["quick"]]:
        torch.manual_seed(0)
        x = torch.randn(shape)
        for name, cls in (("SE", SE), ("ECA", ECA), ("CBAM", CBAM)):
            ours = cls(shape[1]).eval()
            for p in ours.parameters():  # non-trivial weights everywhere (biases too)
                nn.init.normal_(p, std=0.1)
            twin = timm_twin(ours)
            with torch.no_grad():
                diff = (ours(x) - twin(x)).abs().max().item()

            def call(m):
                def run():
                    with torch.no_grad():
                        m(x)

                return run

            t = interleaved_times({"ours": call(ours), "timm": call(twin)}, max(5, cfg["repeats"] * 5))
            r = paired_ratio(t["ours"], t["timm"])
            worst[name] = max(worst.get(name, (0, 0)), (r, diff))
            rows.append([name, "×".join(map(str, shape)), f"{diff:.1e}", "yes" if diff <= 1e-6 else "NO",
                         fmt(median_ms(t["ours"])), fmt(median_ms(t["timm"])), fmt(r)])
    for name, (r, diff) in worst.items():
        ok = "met" if diff <= 1e-6 else "missed"
        s.targets.append((f"{name} faithful to timm (max abs Δ ≤ 1e-6)", f"{diff:.1e}", ok, ""))
        s.targets.append((f"{name} no slower than timm (ours/timm ≤ {TIMM_NOISE})", f"{fmt(r)} (worst shape)",
                          "met" if r <= TIMM_NOISE else "missed", "" if r <= TIMM_NOISE else
                          "same op sequence: a gap this size means noise or a different memory layout; rerun quiet"))
    s.body += [
        f"timm {timm.__version__}. Same weights copied into timm's modules (`attn_yolo.bench.timm_twin`), eval mode, "
        f"fp32; inputs randn. Latency: interleaved, median of {max(5, cfg['repeats'] * 5)} runs each; ratio = median "
        "of per-round ours/timm.",
        "",
        md_table(["block", "input", "max abs Δ", "≤ 1e-6", "ours ms", "timm ms", "ours / timm"], rows),
        "",
        "Definitions: SE = `SEModule(C, rd_channels=ours.hidden)` (identical). ECA = `EcaModule(kernel_size=ours.k)` "
        "(identical; timm clamps its adaptive k to ≥ 3). CBAM = `CbamModule(C, rd_channels=ours.hidden, "
        "spatial_kernel_size=7, mlp_bias=True)`: same channel-then-spatial order, sigmoid gates, avg+max pooling; "
        "timm's default has no MLP bias (ours has) and its spatial conv is conv+BatchNorm without conv bias — the BN "
        "is set to identity + our conv bias, so it costs timm one extra elementwise pass.",
    ]
    return s


# --------------------------------------------------------------------------------------- section 4: training speed
def random_detection_batch(batch: int, imgsz: int, nc: int = 80, per_image: int = 4, seed: int = 0) -> dict:
    """A fixed random Ultralytics detection batch: ``img`` in [0, 1], ``per_image`` boxes (normalised xywh) each."""
    g = torch.Generator().manual_seed(seed)
    n = batch * per_image
    xy = torch.rand(n, 2, generator=g) * 0.6 + 0.2
    wh = torch.rand(n, 2, generator=g) * 0.25 + 0.05
    return {
        "img": torch.rand(batch, 3, imgsz, imgsz, generator=g),
        "batch_idx": torch.arange(batch).repeat_interleave(per_image).float(),
        "cls": torch.randint(0, nc, (n, 1), generator=g).float(),
        "bboxes": torch.cat((xy, wh), 1),
    }


def train_step_fn(model: nn.Module, batch: dict):
    """One training step of an Ultralytics detection model: loss forward, backward, SGD (Ultralytics' defaults)."""
    from ultralytics.cfg import get_cfg

    model.args = get_cfg()  # loss gains (box, cls, dfl) as the trainer sets them
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)

    def step():
        opt.zero_grad(set_to_none=True)
        loss, _ = model.loss(batch)
        loss.sum().backward()
        opt.step()

    return step


def train_section(cfg: dict) -> Section:
    """Section 4: images/s of loss forward+backward+SGD step, each variant vs baseline, interleaved."""
    imgsz, bs, iters = cfg["train_imgsz"], cfg["train_batch"], cfg["train_iters"]
    s = Section(f"4. Training throughput at {imgsz} (batch {bs})")
    batch = random_detection_batch(bs, imgsz)
    steps = {k: train_step_fn(build_detector(y).model, batch) for k, y in detector_yamls(cfg["variants"]).items()}
    torch.set_num_threads(cfg["threads"])
    t = interleaved_times(steps, iters)
    rows = [[k, fmt(median_ms(v)), fmt(bs / statistics.median(v)), fmt(1 / paired_ratio(v, t["baseline"]))]
            for k, v in t.items()]
    s.body += [
        f"Not Ultralytics' trainer (dataloader, EMA and AMP checks would dominate a few iterations): each step is "
        f"`model.loss(batch)` (Ultralytics' detection loss, default gains) forward+backward + SGD (lr 0.01, momentum "
        f"0.937, Nesterov) on one fixed random batch of {bs}×3×{imgsz}×{imgsz} with 4 boxes/image, from-scratch "
        f"weights, {cfg['threads']} threads. One warm-up round, then {iters} round-robin rounds; "
        "throughput ratio = 1 / median of per-round step-time ratios.",
        "",
        md_table(["model", "step ms", "images/s", "throughput × baseline"], rows),
    ]
    return s


# ---------------------------------------------------------------------------------------------- section 5: GPU SDPA
def sdpa_backend_rows(device: str, tokens, dtypes=("float16", "bfloat16"), repeats: int = 10, passes=PASSES):
    """Time and memory of MHSA(128, 4) with each SDPA backend forced, plus explicit/Ultralytics, under autocast.

    Runs on any device (the unit test uses ``"cpu"``); peak memory is ``torch.cuda.max_memory_allocated`` over the
    allocation before the pass, on CUDA only. A backend that cannot run the case reports PyTorch's reason.

    Returns:
        list[list]: rows ``[dtype, N, implementation, pass, kernel, ms | error, peak MiB]``.
    """
    import warnings

    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"flash": "FLASH_ATTENTION", "memory-efficient": "EFFICIENT_ATTENTION", "cuDNN": "CUDNN_ATTENTION",
                "math": "MATH"}
    cuda = device.startswith("cuda")
    rows = []
    for dt in dtypes:
        for n in tokens:
            impls = [(f"MHSA fused, forced {b}", "mhsa", getattr(SDPBackend, e, None)) for b, e in backends.items()]
            impls += [("MHSA explicit", "mhsa_explicit", None), ("Ultralytics Attention", "ultra", None)]
            for label, kind, backend in impls:
                m, (x,) = attention_inputs(kind, n)
                m, x = m.to(device), x.to(device)

                @contextlib.contextmanager
                def ctx(backend=backend):
                    with torch.autocast(device.split(":")[0], dtype=getattr(torch, dt)):
                        with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
                            yield

                for p in passes:
                    fn = attention_call(kind, m, (x,), p, ctx)
                    kernel, ms, mib = None, None, None
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        try:
                            if kind == "mhsa" and backend is None:
                                raise RuntimeError(f"torch {torch.__version__} has no SDPBackend for {label}")
                            if cuda:
                                torch.cuda.synchronize()
                                torch.cuda.reset_peak_memory_stats()
                                base = torch.cuda.memory_allocated()
                            kernel = profile_kernel(fn)
                            ms = fmt(median_ms([timed(fn) for _ in range(repeats)]))
                            if cuda:
                                mib = fmt((torch.cuda.max_memory_allocated() - base) / MIB)
                        except (RuntimeError, MemoryError) as e:
                            why = [str(w.message).splitlines()[0] for w in caught
                                   if any(k in str(w.message).lower() for k in ("sdp", "attention", "kernel"))]
                            err = _short_error(e, None)
                            if "No viable backend" in err:
                                why = f": {' '.join(why)[:200]}" if why else " (no kernel for this input)"
                                ms = "unavailable" + why
                            else:
                                ms = err
                            ms = ms.replace("|", "/")
                            if cuda:
                                torch.cuda.empty_cache()
                    rows.append([dt, n, label, {"fwd": "forward", "fwdbwd": "fwd+bwd"}[p], kernel, ms, mib])
                del m, x
                if cuda:
                    torch.cuda.empty_cache()
    return rows


def gpu_section(cfg: dict) -> Section:
    """Section 5: SDPA backends on the CUDA device, or a note that there is none."""
    s = Section("5. GPU: SDPA backends under fp16/bf16 autocast")
    if not torch.cuda.is_available():
        s.body.append("Skipped: no CUDA device on this machine. On a GPU machine this section forces each SDPA backend "
                      "(`torch.nn.attention.sdpa_kernel`) on MHSA(128, heads=4) and reports kernel, time and "
                      "`torch.cuda.max_memory_allocated` under fp16/bf16 autocast at the token counts of section 1.")
        return s
    rows = sdpa_backend_rows("cuda", cfg["tokens"], repeats=cfg["repeats"])
    s.body += [
        f"{torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}, autocast; median of {cfg['repeats']} runs; "
        "peak = `torch.cuda.max_memory_allocated` minus the allocation before the pass.",
        "",
        md_table(["dtype", "N", "implementation", "pass", "kernel", "median ms", "peak MiB"], rows),
    ]
    return s


# ------------------------------------------------------------------------------------------------------------ report
def machine_table(cfg: dict) -> str:
    """Markdown table: machine, versions, threads."""
    import ultralytics

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    try:
        import psutil

        ram = f"{psutil.virtual_memory().total / 2**30:.1f} GiB"
    except ImportError:
        ram = "?"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    versions = []
    for mod in ("timm", "onnxruntime", "onnx"):
        with contextlib.suppress(ImportError):
            versions.append([mod, __import__(mod).__version__])
    rows = [
        ["CPU", f"{cpu}, {os.cpu_count()} logical cores"],
        ["RAM", ram],
        ["GPU", gpu],
        ["OS", platform.platform()],
        ["Python", platform.python_version()],
        ["torch", f"{torch.__version__} ({cfg['threads']} intra-op threads, set explicitly)"],
        ["Ultralytics", ultralytics.__version__],
        *versions,
        ["mode", "QUICK smoke run: sizes and repeats too small to mean anything" if cfg["quick"] else "full"],
    ]
    return md_table(["machine / software", ""], rows)


def report(sections: list[Section], cfg: dict, argv: list[str], seconds: float) -> str:
    """The whole Markdown report (``BENCHMARKS.md``)."""
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    targets = [t for s in sections for t in s.targets]
    lines = [
        "# attn-yolo benchmarks",
        "",
        f"Generated by `{' '.join(['attn-yolo bench', *argv])}` on {date} in {seconds / 60:.1f} min. "
        "Rerun: `python scripts/bench.py` (or `attn-yolo bench`; `attn-yolo bench help` lists the options). "
        "Timings on a shared machine are meaningless: run it on a quiet one.",
        "",
        machine_table(cfg),
        "",
    ]
    if targets:
        quick = ["**Quick smoke run: statuses below mean nothing.**", ""] if cfg["quick"] else []
        table = md_table(["target", "measured", "status", "note"], [list(t) for t in targets])
        lines += ["## Targets", "", *quick, table, ""]
    lines += [s.markdown() for s in sections]
    return "\n".join(lines)


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
    cfg = kv_args(argv, DEFAULTS, "bench")
    for k, v in (QUICK if cfg["quick"] else FULL).items():
        if cfg[k] is None:
            cfg[k] = v
    cfg["sections"] = _as_list(cfg["sections"], "sections", SECTIONS)
    cfg["variants"] = _as_list(cfg["variants"], "variants", VARIANTS)
    cfg["tokens"] = _as_list(cfg["tokens"], "tokens", cast=int)
    bad = [n for n in cfg["tokens"] if n < 1 or math.isqrt(n) ** 2 != n]
    if bad:
        raise UsageError(f"attn-yolo bench: tokens={bad}: each N must be a perfect square (an H×W map with H = W), "
                         "e.g. 400, 1600, 6400, 25600")
    for k in ("repeats", "warmup", "rounds", "train_iters", "train_batch", "imgsz", "train_imgsz"):
        if not isinstance(cfg[k], int) or isinstance(cfg[k], bool) or cfg[k] < (0 if k == "warmup" else 1):
            raise UsageError(f"attn-yolo bench: {k}={cfg[k]!r}: expected a positive int")
    for k in ("imgsz", "train_imgsz"):
        if cfg[k] % 32:
            raise UsageError(f"attn-yolo bench: {k}={cfg[k]}: must be a multiple of 32 (the detector's max stride)")
    if not isinstance(cfg["threads"], int) or cfg["threads"] < 0:
        raise UsageError(f"attn-yolo bench: threads={cfg['threads']!r}: expected an int >= 0 (0: all usable cores)")
    cfg["threads"] = cfg["threads"] or available_cores()
    if not isinstance(cfg["mem_limit_gb"], (int, float)) or cfg["mem_limit_gb"] < 0:
        raise UsageError(f"attn-yolo bench: mem_limit_gb={cfg['mem_limit_gb']!r}: expected a number >= 0 (0: auto)")
    cfg["mem_limit_gb"] = cfg["mem_limit_gb"] or default_mem_limit_gb()
    cfg["cache"] = cfg["cache"] or str(Path(tempfile.gettempdir()) / "attn-yolo-bench")
    if cfg["out"] is None:
        cfg["out"] = "" if cfg["quick"] else "BENCHMARKS.md"
    return cfg


RUNNERS = {"attention": attention_section, "blocks": blocks_section, "timm": timm_section, "train": train_section,
           "gpu": gpu_section}


def run(cfg: dict, argv: list[str] | None = None) -> tuple[list[Section], str]:
    """Run the configured sections; return them and the Markdown report (also written to ``cfg["out"]`` if set)."""
    torch.set_num_threads(cfg["threads"])
    t0 = time.perf_counter()
    sections = []
    for name in cfg["sections"]:
        print(f"attn-yolo bench: {name} ...", flush=True)
        torch.set_num_threads(cfg["threads"])  # Ultralytics' select_device (export, trainer) resets it
        ts = time.perf_counter()
        s = RUNNERS[name](cfg)
        s.seconds = time.perf_counter() - ts
        print("\n" + s.markdown(), flush=True)
        sections.append(s)
    text = report(sections, cfg, argv or [], time.perf_counter() - t0)
    if cfg["out"]:
        Path(cfg["out"]).write_text(text + "\n")
        print(f"attn-yolo bench: wrote {cfg['out']} ({(time.perf_counter() - t0) / 60:.1f} min)")
    return sections, text


def main(argv: list[str]) -> int:
    """``attn-yolo bench key=value ...``; ``attn-yolo bench help`` prints the keys."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(__doc__)
        print("Keys (key=default; None: the full/quick preset):")
        for k, v in DEFAULTS.items():
            preset = f" [full: {FULL[k]}, quick: {QUICK[k]}]" if k in FULL else ""
            print(f"  {k}={v}{preset}  {KEY_HELP[k]}")
        return 0
    cfg = parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    run(cfg, argv)
    return 0
