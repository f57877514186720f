"""Shared benchmark tools: timing, paired ratios, kernel detection, peak-memory probes, the bench `Section`."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import re
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field

import torch

from attn_yolo import markdown

MIB = 2**20


# -------------------------------------------------------------------------------------------------- tables and timing
SMOKE_WARNING = "**QUICK SMOKE RUN (`quick=True`): tiny sizes, 1-2 repeats. These timings and ratios mean nothing.**"
SMOKE_TABLE_TAG = "_Smoke run (`quick=True`): the numbers in this table mean nothing._"


@dataclass
class Section(markdown.Section):
    """One benchmark section (``markdown.Section``): its Markdown body, target checks and run time. ``smoke`` marks a
    quick run: its Markdown then opens with ``SMOKE_WARNING`` and every table is preceded by ``SMOKE_TABLE_TAG``."""

    targets: list[tuple[str, str, str, str]] = field(default_factory=list)  # (target, measured, status, note)
    seconds: float = 0.0
    smoke: bool = False

    def cases(self) -> int:
        """Rows of the section's tables (body entries that start with ``|``), header and rule lines not counted."""
        return sum(max(0, len(b.splitlines()) - 2) for b in self.body if b[:1] == "|")

    def markdown(self) -> str:
        body = self.body
        if self.smoke:  # tables are body entries that start with "|"
            body = [SMOKE_WARNING, "", *(x for b in body for x in ([SMOKE_TABLE_TAG, "", b] if b[:1] == "|" else [b]))]
        section = markdown.Section(self.title, [*body, "", f"_Section time: {self.seconds:.0f} s._"], self.level)
        return "\n".join(section.lines())


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


def median_ci(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval for the median of ``values`` (order statistics,
    ``scipy.stats.quantile_test``); ``(nan, nan)`` when there are too few values for that confidence."""
    from scipy.stats import quantile_test

    ci = quantile_test(values, q=statistics.median(values), p=0.5).confidence_interval(confidence)
    return float(ci.low), float(ci.high)


def median_ms(times: list[float]) -> float:
    """Median of durations in seconds, in ms."""
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


def short_error(e: BaseException, limit_bytes: int | None) -> str:
    """One line for a failed case: ``out of memory (tried to allocate X GiB; limit Y GiB ...)`` or ``Type: message``."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    m = re.search(r"allocate (\d+) bytes", msg)
    if isinstance(e, MemoryError) or m or "can't allocate memory" in msg or "out of memory" in msg.lower():
        tried = f"tried to allocate {int(m.group(1)) / 2**30:.2f} GiB" if m else "allocation failed"
        lim = f"; limit {limit_bytes / 2**30:.1f} GiB over baseline" if limit_bytes else ""
        return f"out of memory ({tried}{lim})"
    return f"{type(e).__name__}: {msg[:200]}"
