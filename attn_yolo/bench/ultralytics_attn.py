"""Section 6: Ultralytics' own attention (Attention in yolo11, AAttn in yolo12) stock vs fused (``attn_yolo.sdpa``)."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys

import torch

from attn_yolo.bench.common import (
    PeakMemory,
    Section,
    fmt,
    interleaved_times,
    median_ms,
    paired_ratio,
    profile_kernel,
    short_error,
    timed,
)
from attn_yolo.markdown import table
from attn_yolo.progress import bar
from attn_yolo.sdpa import CPU_MIN_TOKENS, attention_layers, fuse_attention, kernel_for
from attn_yolo.ultralytics_api.layers import instance_forward, split_v

IMPLS = ("stock", "fused", "none")
"""``none``: the attention math taken out (``attention_free``), the bound no attention kernel can beat."""
PASSES = {"forward": "forward (eval, no grad)", "train": "training step (loss fwd+bwd, SGD)"}
RESULT_MARK = "ATTN_YOLO_ULTRA_RESULT "
MODULES = {  # label → (Ultralytics class, kwargs, channels): the layers as yolo11n / yolo12n build them
    "Attention(128, heads=2, attn_ratio=0.5) (C2PSA, yolo11n P5)": ("Attention", {"dim": 128, "num_heads": 2}, 128),
    "AAttn(64, heads=2, area=4) (A2C2f, yolo12n P4)": ("AAttn", {"dim": 64, "num_heads": 2, "area": 4}, 64),
    "AAttn(128, heads=4, area=1) (A2C2f, yolo12n P5)": ("AAttn", {"dim": 128, "num_heads": 4, "area": 1}, 128),
}


def _value_path(m, x: torch.Tensor) -> torch.Tensor:
    """Ultralytics ``Attention`` / ``AAttn`` without softmax(QKᵀ)V: ``proj(v + pe(v))``, the convs (qkv, pe, proj)
    as in stock and v standing for the attention output. x: (B, C, H, W) → (B, C, H, W)."""
    v = split_v(m, m.qkv(x))
    return m.proj(v + m.pe(v))


@contextlib.contextmanager
def attention_free(model):
    """Within: every Ultralytics ``Attention`` / ``AAttn`` of ``model`` skips its attention math (``_value_path``, an
    instance-level ``forward``), so a pass's time is the lower bound for any attention kernel (stock, SDPA, a future
    one): ``stock / none`` is the most speed any kernel can give the model."""
    with instance_forward([m for _, m in attention_layers(model)], _value_path):
        yield


def run_model_case(yaml: str, imgsz: int, batch: int, rounds: int, threads: int, force: bool = False) -> dict:
    """Stock vs fused (and ``none``: attention math skipped, the bound) for one model and size in this process: per
    pass, a profiled warm-up of each (the attention kernels that ran), then ``rounds`` rounds, each running all three
    (order alternating); per run its time and extra peak
    resident memory (``PeakMemory``) over the resident memory just before it. Both are the same model object,
    switched with ``fuse_attention(model, enabled)``: same weights, same inputs. ``force``: SDPA at every size
    (``CPU_MIN_TOKENS`` 0; the quick run, whose tiny maps would otherwise all take the explicit path)."""
    torch.set_num_threads(threads)
    saved = dict(CPU_MIN_TOKENS)
    if force:
        CPU_MIN_TOKENS.update(dict.fromkeys(CPU_MIN_TOKENS, 0))
    try:
        return _model_case(yaml, imgsz, batch, rounds)
    finally:
        CPU_MIN_TOKENS.update(saved)


def _model_case(yaml: str, imgsz: int, batch: int, rounds: int) -> dict:
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.bench.train import random_detection_batch, train_step_fn

    torch.manual_seed(0)
    model = DetectionModel(yaml, verbose=False)
    data = random_detection_batch(batch, imgsz)
    step = train_step_fn(model, data)

    def forward():
        model.eval()
        with torch.no_grad():
            model(data["img"])

    out, mem = {"memory_method": PeakMemory().method}, PeakMemory()
    for p, fn in (("forward", forward), ("train", step)):
        res = {i: {"times": [], "peaks": []} for i in IMPLS}
        for impl in IMPLS:
            fuse_attention(model, impl == "fused")
            with attention_free(model) if impl == "none" else contextlib.nullcontext():
                res[impl]["kernel"] = profile_kernel(fn)
        for r in range(rounds):
            for impl in IMPLS if r % 2 == 0 else IMPLS[::-1]:
                fuse_attention(model, impl == "fused")
                with attention_free(model) if impl == "none" else contextlib.nullcontext():
                    mem.start()
                    res[impl]["times"].append(timed(fn))
                    res[impl]["peaks"].append(mem.peak_mib())
        out[p] = res
    return out


def _worker(spec_json: str) -> None:
    """Subprocess entry: ``run_model_case(**spec)`` as one JSON line."""
    try:
        res = run_model_case(**json.loads(spec_json))
    except BaseException as e:  # noqa: BLE001  report, never hang the parent
        res = {"error": short_error(e, None)}
    print(RESULT_MARK + json.dumps(res), flush=True)


def bench_model_case(spec: dict, isolate: bool = True, timeout_s: float = 3600) -> dict:
    """``run_model_case`` in a fresh subprocess (glibc returns freed blocks to the OS at once, so resident memory
    tracks live tensors for both paths alike, as in section 1); in this process when not ``isolate``."""
    if not isolate:
        return run_model_case(**spec)
    code = f"import sys; from {__name__} import _worker; _worker(sys.argv[1])"
    env = {**os.environ, "YOLO_OFFLINE": "1", "KINETO_LOG_LEVEL": "5", "MALLOC_MMAP_THRESHOLD_": "65536"}
    try:
        p = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], capture_output=True, text=True,
                           timeout=timeout_s, env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith(RESULT_MARK)), None)
    if line is None:
        tail = (p.stderr.strip().splitlines() or [""])[-1][:200]
        return {"error": f"subprocess exit code {p.returncode} {tail}".strip()}
    return json.loads(line[len(RESULT_MARK) :])


def module_rows(sides, rounds: int, threads: int) -> list[list]:
    """Each layer alone at each map side (batch 2), forward and fwd+bwd: explicit (stock) vs SDPA forced, interleaved;
    and which one ``kernel_for`` picks there with ``CPU_MIN_TOKENS``."""
    from ultralytics.nn.modules import block

    torch.set_num_threads(threads)
    rows = []
    saved = dict(CPU_MIN_TOKENS)
    try:
        for label, (cls, kw, c) in MODULES.items():
            torch.manual_seed(0)
            m = fuse_attention(getattr(block, cls)(**kw).eval())
            for side in sides:
                x = torch.randn(2, c, side, side)
                CPU_MIN_TOKENS.update(saved)
                policy = kernel_for(m, x)
                n = side * side // kw.get("area", 1)
                for p in ("forward", "train"):
                    xx = x.clone().requires_grad_(p == "train")

                    def run(on, xx=xx, p=p, m=m):
                        CPU_MIN_TOKENS.update({k: 0 if on else 10**9 for k in CPU_MIN_TOKENS})
                        if p == "forward":
                            with torch.no_grad():
                                m(xx)
                        else:
                            m(xx).sum().backward()

                    kern = profile_kernel(lambda run=run: run(True))
                    t = interleaved_times({"stock": lambda run=run: run(False), "sdpa": lambda run=run: run(True)},
                                          rounds)  # fmt: skip
                    speed = 1 / paired_ratio(t["sdpa"], t["stock"])
                    rows.append([label, f"{side}×{side}", n, {"forward": "forward", "train": "fwd+bwd"}[p],
                                 fmt(median_ms(t["stock"])), fmt(median_ms(t["sdpa"])), fmt(speed), kern,
                                 "SDPA" if policy == "sdpa" else "explicit"])  # fmt: skip
    finally:
        CPU_MIN_TOKENS.update(saved)
    return rows


def _median(v):
    return statistics.median(v) if v else None


def ultralytics_section(cfg: dict) -> Section:
    """Section 6: yolo11n and yolo12n, stock vs fused, forward and training step: time, peak memory, kernels."""
    quick = cfg["quick"]
    sizes, batch, rounds = ((64,), 2, 1) if quick else ((640, 1280), 2, cfg["ultra_rounds"])
    s = Section("6. Ultralytics' own attention on SDPA (`attn_yolo.fuse_attention`): yolo11n, yolo12n")
    results = {}
    cases = [(y, i) for y in ("yolo12n.yaml", "yolo11n.yaml") for i in sizes]  # yolo12n first: the targets are on it
    for yaml, imgsz in bar(cases, "bench ultralytics", unit="case"):
        spec = dict(yaml=yaml, imgsz=imgsz, batch=batch, rounds=rounds, threads=cfg["threads"], force=quick)
        r = results[yaml, imgsz] = bench_model_case(spec, isolate=cfg["isolate"])
        if quick:  # a quick run: its table at the end
            continue
        brief = r.get("error") or "  ".join(
            f"{p}: {fmt(median_ms(r[p]['stock']['times']))} / {fmt(median_ms(r[p]['fused']['times']))} ms, "
            f"{fmt(_median(r[p]['stock']['peaks']))} / {fmt(_median(r[p]['fused']['peaks']))} MiB (stock / fused)"
            for p in PASSES)
        print(f"  ultralytics {yaml} {imgsz}: {brief}", flush=True)
    rows = []
    for (yaml, imgsz), r in results.items():
        for p, label in PASSES.items():
            if "error" in r:
                rows.append([yaml[:-5], imgsz, label, r["error"], *[None] * 9])
                continue
            st, fu, no = r[p]["stock"], r[p]["fused"], r[p]["none"]
            speed, bound = 1 / paired_ratio(fu["times"], st["times"]), 1 / paired_ratio(no["times"], st["times"])
            ms, mf = _median(st["peaks"]), _median(fu["peaks"])
            rows.append([yaml[:-5], imgsz, label, fmt(median_ms(st["times"])), fmt(median_ms(fu["times"])), fmt(speed),
                         fmt(median_ms(no["times"])), fmt(bound), fmt(ms), fmt(mf), fmt(ms / mf if mf else None),
                         fu["kernel"], st["kernel"]])  # fmt: skip
            r[p]["speed"], r[p]["bound"], r[p]["memory"] = speed, bound, (ms / mf if mf else None)
    sides = (8,) if quick else (10, 14, 16, 20, 28, 40)
    mrows = module_rows(sides, 1 if quick else cfg["ultra_rounds"] * 4, cfg["threads"])
    s.body += [
        f"CPU, {cfg['threads']} threads, fp32, batch {batch}, models built from the YAMLs (random weights). Stock = "
        "Ultralytics 8.4.190's explicit softmax(QKᵀ)V; fused = `attn_yolo.fuse_attention` on the same model object "
        f"(kernel per layer and shape by `kernel_for`; CPU thresholds `CPU_MIN_TOKENS` = {dict(CPU_MIN_TOKENS)}). "
        f"Each model and size in a fresh subprocess; per pass one profiled warm-up each, then {rounds} rounds "
        "running both (order alternating). Speed × = 1 / median over rounds of fused/stock time (> 1: fused "
        "faster). Peak = median extra resident memory of a run over the memory before it (glibc returning freed "
        "blocks at once). Training step: Ultralytics' detection loss forward + backward + SGD on one random batch. "
        "Kernel: what the profiler saw run for attention. No attention: the same model with the attention math "
        "taken out of every layer (`proj(v + pe(v))`, the convs kept), run in the same rounds; its speed × is the most "
        "any attention kernel can give that pass (Amdahl's bound)."
        + (" Quick run: SDPA forced at every size (`CPU_MIN_TOKENS` 0), so the fused path runs." if quick else ""),
        "",
        table(["model", "imgsz", "pass", "stock ms", "fused ms", "speed ×", "no attention ms", "bound ×",
                  "stock peak MiB", "fused peak MiB", "memory ×", "fused: kernels", "stock: kernels"],
                 rows),  # fmt: skip
        "",
        "### Each layer alone: where SDPA wins on this CPU (sets `CPU_MIN_TOKENS`)",
        "",
        f"Batch 2, random input, SDPA forced vs Ultralytics' explicit path, {1 if quick else cfg['ultra_rounds'] * 4} "
        "interleaved rounds; speed × > 1: SDPA faster. Last column: the path `fuse_attention` takes there.",
        "",
        table(["layer", "map", "tokens / sequence", "pass", "explicit ms", "SDPA ms", "speed ×", "SDPA kernel",
                  "fused model uses"], mrows),  # fmt: skip
    ]
    if not quick:
        _targets(s, results)
    return s


def _targets(s: Section, results: dict) -> None:
    get = lambda y, i, p, k: (results.get((y, i)) or {}).get(p, {}).get(k)  # noqa: E731
    m = get("yolo12n.yaml", 1280, "train", "memory")
    s.targets.append(("yolo12n at 1280, training step: peak memory ≥ 1.25× lower (fused)", f"{fmt(m)}×",
                      "not measured" if m is None else "met" if m >= 1.25 else "missed", ""))
    t, b = get("yolo12n.yaml", 640, "train", "speed"), get("yolo12n.yaml", 640, "train", "bound")
    why = "" if t is None or t >= 1.3 or b is None else (
        f"attention-free bound {fmt(b)}×: {'no kernel can reach 1.3× here' if b < 1.3 else 'reachable in principle'}"
        f"; fused takes {fmt(100 * (1 - 1 / t) / (1 - 1 / b), 2)} % of the time attention can give back")
    s.targets.append(("yolo12n at 640, training step: ≥ 1.3× faster (fused)", f"{fmt(t)}×",
                      "not measured" if t is None else "met" if t >= 1.3 else "missed", why))
    speeds = {f"{y[:-5]} {i} {p}": get(y, i, p, "speed") for y, i in results for p in PASSES}
    slow = [f"{k}: {fmt(v)}×" for k, v in speeds.items() if v is not None and v < 0.97]
    shown = ", ".join(f"{k} {fmt(v)}×" for k, v in speeds.items() if v is not None)
    s.targets.append(("Ultralytics attention fused: no size slower than stock (speed × ≥ 0.97, the noise band)",
                      shown or "—", "not measured" if not shown else "missed" if slow else "met", "; ".join(slow)))


CUDA_IMPLS = {  # label → (fused, SDPBackend name forced for the whole pass, or None: PyTorch's dispatcher)
    "stock (explicit)": (False, None),
    "fused (dispatcher)": (True, None),
    "fused, flash forced": (True, "FLASH_ATTENTION"),
    "fused, memory-efficient forced": (True, "EFFICIENT_ATTENTION"),
}


def device_rows(device: str, yamls=("yolo11n.yaml", "yolo12n.yaml"), sizes=(640, 1280), batch: int = 2,
                dtypes=("float16", "bfloat16"), repeats: int = 10) -> list[list]:  # fmt: skip
    """Stock vs fused on ``device`` under autocast: each model, size, dtype, implementation (``CUDA_IMPLS``) and pass
    (forward; training step = loss forward under autocast + backward): attention kernels that ran, median ms, speed ×
    stock, and on CUDA ``torch.cuda.max_memory_allocated`` over the allocation before the pass. Used by
    ``scripts/gpu_check.py``; runs on CPU too (the unit test). A backend that cannot run a case says so.

    Returns:
        list[list]: ``[model, imgsz, dtype, implementation, pass, kernel, ms | reason, speed ×, peak MiB]``.
    """
    from ultralytics.cfg import get_cfg
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.bench.train import random_detection_batch

    rows = []
    for yaml in yamls:
        torch.manual_seed(0)
        model = DetectionModel(yaml, verbose=False).to(device)
        model.args = get_cfg()
        for imgsz in sizes:
            data = {k: v.to(device) for k, v in random_detection_batch(batch, imgsz).items()}
            for dt in dtypes:
                rows += _dtype_rows(model, data, device, dt, repeats, [yaml[:-5], imgsz, dt])
        fuse_attention(model, False)
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def _dtype_rows(model, data: dict, device: str, dt: str, repeats: int, head: list) -> list[list]:
    """The rows of one model, size and dtype (``head``): each implementation's forward and training step, the speed
    against the stock implementation (the first of ``CUDA_IMPLS``)."""
    stock_ms, rows = {}, []
    for label, (on, backend) in CUDA_IMPLS.items():
        fuse_attention(model, on)
        forward, step = _passes(model, data, device, dt, backend)
        for p, fn in (("forward", forward), ("train", step)):
            kernel, ms, speed, mib = _measure(fn, device, repeats, stock_ms, p)
            rows.append([*head, label, p, kernel, ms, speed, mib])
    return rows


def _passes(model, data: dict, device: str, dt: str, backend):
    """The forward pass and the training step (loss forward + backward) of ``model`` on ``data``, under autocast to
    ``dt`` and, if ``backend`` names one, with SDPA held to that backend."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    @contextlib.contextmanager
    def ctx():
        with torch.autocast(device.split(":")[0], dtype=getattr(torch, dt)):
            with sdpa_kernel(getattr(SDPBackend, backend)) if backend else contextlib.nullcontext():
                yield

    def forward():
        model.eval()
        with torch.no_grad(), ctx():
            model(data["img"])

    def step():
        model.train()
        model.zero_grad(set_to_none=True)
        with ctx():
            loss, _ = model.loss(data)
        loss.sum().backward()

    return forward, step


def _measure(fn, device: str, repeats: int, stock_ms: dict, p: str) -> tuple:
    """``(kernel, ms | reason, speed ×, peak MiB)`` of one pass ``p``; the first implementation's ms per pass is kept
    in ``stock_ms`` for the speed. A backend that cannot run the case gives its reason in place of the ms."""
    cuda = device.startswith("cuda")
    kernel = mib = speed = None
    try:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        kernel = profile_kernel(fn)
        ms = median_ms([timed(fn) for _ in range(repeats)])
        if cuda:
            mib = fmt((torch.cuda.max_memory_allocated() - base) / 2**20)
        stock_ms.setdefault(p, ms)
        speed, ms = fmt(stock_ms[p] / ms), fmt(ms)
    except (RuntimeError, MemoryError) as e:
        err = short_error(e, None)
        ms = ("unavailable (no kernel for this input)" if "No viable backend" in err else err)
        ms = ms.replace("|", "/")
        if cuda:
            torch.cuda.empty_cache()
    return kernel, ms, speed, mib


DEVICE_HEADERS = ["model", "imgsz", "dtype", "implementation", "pass", "kernels", "median ms", "speed × stock",
                  "peak MiB"]
