"""Section 1: fused SDPA vs explicit attention vs Ultralytics' ``Attention``, each case in a fresh subprocess."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import subprocess
import sys
import time

import torch
from torch import nn

from attn_yolo.bench.common import (
    PeakMemory,
    Section,
    address_space_limit,
    fmt,
    median_ms,
    profile_kernel,
    ratio,
    short_error,
    timed,
)
from attn_yolo.markdown import table
from attn_yolo.nn import MHSA, BiLevelRoutingAttention
from attn_yolo.progress import bar

C, HEADS = 128, 4  # attention benchmark: 4 heads × head width 32
ULTRA_ATTN_RATIO = 1.0  # Ultralytics Attention(128, 4, attn_ratio=1.0): key_dim = head_dim = 32 for q, k and v
ATTN_KINDS = {  # case name → (level, label)
    "sdpa": ("op", "fused SDPA (F.scaled_dot_product_attention)"),
    "explicit": ("op", "explicit softmax(QKᵀ/√d)V (MHSA.attend, fused=False)"),
    "mhsa": ("block", "MHSA(128, heads=4), fused"),
    "mhsa_explicit": ("block", "MHSA(128, heads=4), fused=False"),
    "ultra": ("block", "Ultralytics Attention(128, 4, attn_ratio=1.0)"),
    "bra": ("block", "BiLevelRoutingAttention(128, heads=4), 7×7 regions, top-4"),
}
PASSES = ("fwd", "fwdbwd")
MIN_REPEATS = 3  # a case whose single run exceeds case_budget_s / repeats runs this many times at least
RESULT_MARK = "ATTN_YOLO_BENCH_RESULT "  # prefix of the worker's one JSON result line on stdout


def attention_inputs(kind: str, n: int, seed: int = 0):
    """The module and input of one attention case at ``n`` tokens: ``(module, inputs tuple)``."""
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"tokens={n} is not a perfect square (H = W = sqrt(N) feature map)")
    torch.manual_seed(seed)
    if kind == "ultra":
        from ultralytics.nn.modules.block import Attention

        m = Attention(C, num_heads=HEADS, attn_ratio=ULTRA_ATTN_RATIO)
    elif kind == "bra":
        m = BiLevelRoutingAttention(C, heads=HEADS)
    else:
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
                res["error"] = short_error(e, mem_limit_bytes)
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
    code = f"import sys; from {__name__} import _worker; _worker(sys.argv[1])"
    # glibc returns freed blocks >= 64 KiB to the OS at once (mmap), so resident memory tracks live tensors and the peak
    # is the same for every path rather than depending on what the allocator happened to keep cached.
    env = {**os.environ, "YOLO_OFFLINE": "1", "KINETO_LOG_LEVEL": "5", "MALLOC_MMAP_THRESHOLD_": "65536"}
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
    results = _run_attention_cases(cfg)
    s.body += _attention_setup(cfg, results)
    for level, title in (("op", "Bare attention op: (q, k, v) → out, each (1, 4, N, 32)"), ("block", "Whole block")):
        heads = ["N (map)", "pass", "implementation", "kernel", "n", "median ms", "extra peak MiB"]
        rows = _attention_rows(results, cfg["tokens"], level)
        s.body += [f"### {title}", "", table([*heads, "time × fused", "memory × fused"], rows), ""]
    attention_targets(s, results, cfg["tokens"])
    return s


def _run_attention_cases(cfg: dict) -> dict:
    """``{(kind, N): result}`` of every implementation (``ATTN_KINDS``) at every token count; a full run logs each."""
    limit = int(cfg["mem_limit_gb"] * 2**30)
    results = {}
    for n, kind in bar([(n, k) for n in cfg["tokens"] for k in ATTN_KINDS], "bench attention", unit="case"):
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
        if not cfg["quick"]:  # a full run logs each case (a quick one: its table at the end)
            ms = {p: fmt((r.get(p) or {}).get("ms")) for p in PASSES}
            brief = [f"{p}: {ms[p]} ms" if ms[p] else f"{p}: {(r.get(p) or r).get('error')}" for p in PASSES]
            print(f"  attention {kind:<14} N={n:<6} " + "  ".join(brief), flush=True)
    return results


def _attention_setup(cfg: dict, results: dict) -> list[str]:
    """The paragraphs above the tables: how it was measured, and how Ultralytics' ``Attention`` compares to MHSA."""
    method = next((r["memory_method"] for r in results.values() if "memory_method" in r), "?")
    where = "each case in a fresh subprocess" if cfg["isolate"] else "all cases in one process (isolate=False)"
    return [
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


def _attention_rows(results: dict, tokens, level: str) -> list[list]:
    """One table's rows (``level``: ``op`` or ``block``): per token count, pass and implementation, its time and
    memory and their ratios to the fused row (``sdpa`` / ``mhsa``) of the same N and pass."""
    rows = []
    for n in tokens:
        side = math.isqrt(n)
        for p in PASSES:
            ref = (results["sdpa" if level == "op" else "mhsa", n].get(p)) or {}
            for kind, (lv, label) in ATTN_KINDS.items():
                if lv != level:
                    continue
                r = results[kind, n].get(p) or {"error": results[kind, n].get("error")}
                ms, mib = r.get("ms"), r.get("peak_mib")
                fused = kind in ("sdpa", "mhsa")
                rows.append([
                    f"{n} ({side}×{side})",
                    {"fwd": "forward", "fwdbwd": "fwd+bwd"}[p],
                    label,
                    r.get("kernel") or "—",
                    r.get("repeats"),
                    fmt(ms) if ms is not None else r.get("error"),
                    fmt(mib, 3),
                    None if fused else fmt(ratio(ms, ref.get("ms"))),
                    None if fused else fmt(ratio(mib if ms else None, ref.get("peak_mib"), 0.05)),
                ])
    return rows


def attention_targets(s: Section, results: dict, tokens) -> None:
    """Add the attention section's targets (N = 6400 forward, N = 25600 outcome, kernel visibility) to ``s``."""
    get = lambda k, n, p="fwd": results.get((k, n), {}).get(p) or {}  # noqa: E731
    n0 = 6400
    if n0 in tokens:
        f, e, u = get("mhsa", n0), get("mhsa_explicit", n0), get("ultra", n0)
        bo, be = get("sdpa", n0), get("explicit", n0)
        mem = ratio(e.get("peak_mib"), f.get("peak_mib"), 0.05)
        op_mem = ratio(be.get("peak_mib"), bo.get("peak_mib"), 0.05)
        note = f"bare op: {fmt(op_mem)}× ({fmt(bo.get('peak_mib'))} vs {fmt(be.get('peak_mib'))} MiB)"
        if _status(mem, 50) == "missed":
            note += (f". The fused block's own activations ({fmt(f.get('peak_mib'))} MiB: q, k, v and their "
                     "(B, h, N, d) copies, MLP hidden and GELU output, LayerNorm outputs, residual sums: ~10 N×C "
                     "maps) set its floor, not attention. Closing it: in-place residual adds under no_grad, the MLP "
                     "chunked over tokens")
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
        parts = [f"{p}: " + (get("bra", n1, p).get("error") or f"{fmt(get('bra', n1, p).get('ms'))} ms, "
                             f"{fmt(get('bra', n1, p).get('peak_mib'))} MiB") for p in PASSES]
        s.targets.append(("BiLevelRoutingAttention at P3 of a 1280 input (160×160 tokens, C=128 as yolo11n's P3): "
                          "memory", "; ".join(parts), "reported", ""))
    kernels = {(k, n, p): get(k, n, p).get("kernel") for k in ("sdpa", "mhsa") for n in tokens for p in PASSES}
    bad = sorted({f"{k} N={n} {p}: {v}" for (k, n, p), v in kernels.items() if v and "flash" not in v})
    seen = sorted({v for v in kernels.values() if v})
    s.targets.append(("kernel that ran is reported; no silent math fallback", ", ".join(seen) or "—",
                      "met" if seen and not bad else "missed", "; ".join(bad)))


def _status(value: float | None, at_least: float) -> str:
    return "not measured" if value is None else ("met" if value >= at_least else "missed")
