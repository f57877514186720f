"""Section 2: latency overhead of each attention variant on yolo11n, in PyTorch, onnxruntime and OpenVINO (CPU)."""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import torch

from attn_yolo.args import UsageError
from attn_yolo.bench.common import Section, fmt, interleaved_times, median_ci, median_ms, paired_ratio
from attn_yolo.markdown import table
from attn_yolo.progress import bar

PACKAGE = Path(__file__).resolve().parent.parent  # attn_yolo/


class Variant(NamedTuple):
    """A block benchmarked on yolo11n (``models/yolo11-<name>.yaml``): its overhead target and what to try if missed."""

    max_overhead: float | None  # max latency overhead over the baseline at 640 (PyTorch); None: reported, no target
    hint: str = ""


VARIANTS = {  # variant name (``variants=``, sections 2 and 4) → Variant; adding a block is one entry here
    "se": Variant(
        0.03, "two pooled 1×1 convs per stage; overhead is the extra full-tensor multiply x·s (memory-bound)"
    ),
    "eca": Variant(
        0.03, "as SE: the full-tensor multiply x·s dominates; a fused mul into the next conv would remove it"
    ),
    "sam": Variant(
        0.05, "channel mean+max and a 7×7 conv over the P3 map (80×80) are memory-bound passes; k=3 or P4/P5 only"
    ),
    "cbam": Variant(0.08, "two gates = two full-tensor multiplies plus SAM's passes; drop it from P3 or use k=3"),
    "mhsa": Variant(
        0.10, "400 tokens at P5 are cheap; the cost is the MLP (C→2C→C) and LayerNorms; mlp_ratio=1 would halve it"
    ),
    "coordatt": Variant(
        0.08,
        "two directional mean pools, a 1×1 conv on H+W cells and two broadcast multiplies x·g_h·g_w (memory-bound)",
    ),
    "ema": Variant(
        0.08,
        "a 3×3 conv, GroupNorm and a softmax aggregation per group over the full P3 map; several memory-bound passes",
    ),
    "simam": Variant(
        0.08, "parameter-free but five elementwise passes (mean, variance, energy, sigmoid, multiply) over every tensor"
    ),
    "nam": Variant(0.08, "a BatchNorm (not foldable: it feeds a gate), a sigmoid and a multiply over the full tensor"),
    "shuffleattention": Variant(
        0.08, "GroupNorm, two gates, a concat and a channel shuffle (reshape+transpose copy) over the full tensor"
    ),
    "tripletattention": Variant(
        0.08, "three Z-pools (max+mean over C, H and W), three 7×7 convs and three broadcast multiplies per stage"
    ),
    "lska": Variant(
        0.08, "four depthwise 1-D convs (3 + 3 + dilated 3 + 3 taps at k=7) and a dense 1×1 conv C→C over every map"
    ),
    "mlca": Variant(0.08, "a 5×5 local pool (one pass), tiny 1-D convs, an un-pooled gate map and one multiply"),
    "ela": Variant(0.08, "two directional means, a depthwise 1-D conv with GroupNorm, two broadcast multiplies"),
    "caa": Variant(
        0.08,
        "a 7×7 average pool (as 1×7 + 7×1) and two dense 1×1 convs C→C with BN+SiLU over every map: about 0.3 "
        "GMACs on yolo11n at 640, ~10 % of its compute, by design; drop it from P3 or use it inside C3k2",
    ),
    "skattention": Variant(
        0.08,
        "two grouped 3×3 convs (one dilated) per stage at the paper's G = 32: at P3 (128 channels, 4 per group, run "
        "merged as 8) each takes ~1.8 ms on 2 threads, ~80 % of the block; drop it from P3 or use fewer groups",
    ),
    "bilevelroutingattention": Variant(
        0.15,
        "at P5 (400 tokens) the cost is the qkv/out 1×1 convs, the region gather and SDPA per region; the same "
        "block at P3 attends 6400 tokens (12× the gathered keys)",
    ),
    "gam": Variant(
        0.15,
        "dense 7×7 convs C→C/r→C without pooling: 2·49·C²/r MACs per pixel, about 5 GFLOPs at P3 (80×80, C=128) "
        "alone, so GAM roughly doubles yolo11n's GFLOPs; group the 7×7 convs or drop GAM from P3",
    ),
    "c3k2_cbam": Variant(
        0.10,
        "CBAM inside every bottleneck of the backbone's four C3k2 rows (6 blocks, P2 to P5): two gates, two "
        "full-tensor multiplies and a 7×7 conv per bottleneck, at P2/4 on the largest map; use C3k2_ECA or skip row 2",
    ),
}


def models_dir() -> Path:
    """The repository's ``models/`` folder (next to the ``attn_yolo`` package)."""
    return PACKAGE.parent / "models"


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
    from ultralytics import YOLO

    from attn_yolo.registry import register

    register()
    return YOLO(yaml, verbose=False)


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The outermost attention blocks in ``model`` (instances of the registry's blocks, e.g. the three ``LSKA`` rows,
    or the ``CBAM`` inside each bottleneck of ``C3k2_CBAM``), in module order."""
    from attn_yolo.registry import BLOCKS

    kinds, found, inner = tuple(BLOCKS.values()), [], set()
    for m in model.modules():
        if isinstance(m, kinds) and id(m) not in inner:
            found.append(m)
            inner.update(id(c) for c in m.modules())
    return found


class BlockClock:
    """Seconds spent inside ``attention_modules(model)`` during each forward (forward pre/post hooks on the blocks
    themselves, which change no block's path): the blocks' own time in the model, read in the same runs as the
    whole-model time. ``run()`` is one timed forward; ``seconds`` one entry per call."""

    def __init__(self, model: torch.nn.Module, x: torch.Tensor):
        self.model, self.x, self.seconds, self._t, self._start = model, x, [], 0.0, 0.0
        for m in attention_modules(model):
            m.register_forward_pre_hook(self._enter)
            m.register_forward_hook(self._leave)

    def _enter(self, *_):
        self._start = time.perf_counter()

    def _leave(self, *_):
        self._t += time.perf_counter() - self._start

    def run(self):
        self._t = 0.0
        with torch.no_grad():
            self.model(self.x)
        self.seconds.append(self._t)


def block_sources() -> list[Path]:
    """The attn_yolo sources that shape an export: ``conventions.py``, ``row_readings.py``, ``signatures.py``,
    ``registry.py``, ``csp.py``, the seam ``ultralytics_api/`` and every file of ``nn/``."""
    own = [PACKAGE / "conventions.py", PACKAGE / "row_readings.py", PACKAGE / "signatures.py",
           PACKAGE / "registry.py", PACKAGE / "csp.py",
           *sorted((PACKAGE / "ultralytics_api").glob("*.py"))]
    return [*own, *sorted((PACKAGE / "nn").glob("*.py"))]


def _cache_key(yaml: str, imgsz: int) -> str:
    """Hash of what shapes an export: versions, ``imgsz``, the YAML text and the attn_yolo sources."""
    import ultralytics

    h = hashlib.sha1(f"{ultralytics.__version__} {torch.__version__} {imgsz} {Path(yaml).name}".encode())
    src = models_dir() / re.sub(r"^yolo11[nslmx]-", "yolo11-", Path(yaml).name)
    if src.is_file():
        h.update(src.read_bytes())
    for f in block_sources():
        h.update(f.read_bytes())
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


def export_openvino_cached(yaml: str, imgsz: int, cache: Path) -> Path:
    """OpenVINO IR (``.xml``) of ``YOLO(yaml)`` at ``imgsz`` via ``attn_yolo.export.export_openvino`` (Ultralytics'
    exporter, fp32, static), cached under ``cache`` by the same content hash as the ONNX exports."""
    from attn_yolo.export import export_openvino

    cache.mkdir(parents=True, exist_ok=True)
    dst = cache / f"{Path(yaml).stem}-{imgsz}-{_cache_key(yaml, imgsz)}_openvino_model"
    if dst.is_dir():
        return next(dst.glob("*.xml"))
    for old in cache.glob(f"{Path(yaml).stem}-{imgsz}-*_openvino_model"):  # stale exports of the same model
        shutil.rmtree(old)
    with tempfile.TemporaryDirectory(dir=cache) as tmp, _quiet_ultralytics():
        f = export_openvino(build_detector(yaml), imgsz=imgsz, out=Path(tmp) / dst.name)
        shutil.move(str(f.parent), dst)
    return next(dst.glob("*.xml"))


def exports_cached(export, yamls: dict, imgsz: int, cache: Path, what: str) -> dict:
    """``{name: export(yaml, imgsz, cache)}`` for every model, under a progress bar; one line when some were made
    (the cache folder, reused by later runs)."""
    made = 0
    files = {}
    for k, y in bar(yamls.items(), f"bench {what} exports", total=len(yamls), unit="model"):
        before = cache.is_dir() and any(cache.glob(f"{Path(y).stem}-{imgsz}-{_cache_key(y, imgsz)}*"))
        files[k] = export(y, imgsz, cache)
        made += not before
    if made:
        print(f"attn-yolo bench: {made} {what} export(s) made and cached in {cache} (reused by later runs; delete the "
              "folder to clear, or set cache=)", flush=True)
    return files


def _openvino_times(yamls: dict, imgsz: int, threads: int, rounds: int, cache: Path) -> tuple[dict, str]:
    """Round-robin OpenVINO CPU times of every model (``interleaved_times``), and the note under the table."""
    try:
        import numpy as np
        import openvino

        from attn_yolo.export import OpenVINORuntime
    except ImportError as e:
        return {}, f"OpenVINO not measured: {e} (pip install 'attn-yolo[openvino]')"
    files = exports_cached(export_openvino_cached, yamls, imgsz, cache, "OpenVINO")
    torch.set_num_threads(threads)  # Ultralytics' exporter resets it (select_device)
    x = np.random.default_rng(0).random((1, 3, imgsz, imgsz), dtype=np.float32)
    rts = {k: OpenVINORuntime(f, "f32", threads) for k, f in files.items()}
    times = interleaved_times({k: (lambda r=r: r.run(x)) for k, r in rts.items()}, rounds)
    prec = next(iter(rts.values())).inference_precision
    note = (f"OpenVINO {openvino.get_version().split('-')[0]}, CPU plugin, inference precision {prec}, {threads} "
            f"threads; `attn_yolo.export.export_openvino` (Ultralytics' exporter, static fp32 IR) at {imgsz}, cached "
            f"in `{cache}`; compiled models (`attn_yolo.export.OpenVINORuntime`) driven round-robin like the others.")
    return times, note


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


def ratio_ci(times: dict, k: str) -> tuple[float, float, float] | None:
    """``(median, ci_low, ci_high)`` of the per-round ratios ``times[k] / times["baseline"]`` (the median as
    ``paired_ratio``, the CI by ``median_ci``); None when ``times`` is empty (a runtime not measured); the CI is NaN
    for the baseline itself."""
    if not times:
        return None
    r = [t / b for t, b in zip(times[k], times["baseline"])]
    lo, hi = median_ci(r) if k != "baseline" else (math.nan, math.nan)
    return statistics.median(r), lo, hi


def ratio_cell(r: tuple[float, float, float] | None) -> str | None:
    """A table cell: ``1.07 (1.03–1.10)``, or the bare ratio when there is no CI."""
    if r is None:
        return None
    return fmt(r[0]) + (f" ({fmt(r[1])}–{fmt(r[2])})" if not math.isnan(r[1]) else "")


def overhead_text(r: tuple[float, float, float]) -> str:
    """``+7.0% (95% CI +3.0% to +10.0%)``: a ratio from ``ratio_ci`` as an overhead."""
    return f"{r[0] - 1:+.1%}" + (f" (95% CI {r[1] - 1:+.1%} to {r[2] - 1:+.1%})" if not math.isnan(r[1]) else "")


def _onnx_times(cfg: dict, yamls: dict, imgsz: int, threads: int, rounds: int) -> tuple[dict, str]:
    """onnxruntime times of every model, interleaved as the PyTorch runs, and the note under the table."""
    if not cfg["onnx"]:
        return {}, "onnxruntime not measured (onnx=False)."
    try:
        import numpy as np

        from attn_yolo.export import ort_session

        files = exports_cached(export_onnx_cached, yamls, imgsz, Path(cfg["cache"]), "ONNX")
        torch.set_num_threads(threads)  # Ultralytics' exporter resets it (select_device)
        xn = np.random.default_rng(0).random((1, 3, imgsz, imgsz), dtype=np.float32)
        sessions = {}
        for k, f in files.items():
            sess = ort_session(f, threads)
            sessions[k] = (sess, {sess.get_inputs()[0].name: xn})
        t_ort = interleaved_times(
            {k: (lambda s_=s_, f_=f_: s_.run(None, f_)) for k, (s_, f_) in sessions.items()}, rounds
        )
    except ImportError as e:
        return {}, f"onnxruntime not measured: {e} (pip install 'attn-yolo[export]')"
    return t_ort, (
        f"onnxruntime {__import__('onnxruntime').__version__}, CPU provider, {threads} intra-op "
        f"threads; `attn_yolo.export.export_onnx` (Ultralytics' exporter) at {imgsz}, cached in "
        f"`{cfg['cache']}`. Sessions (`attn_yolo.export.ort_session`) are driven round-robin like the "
        "PyTorch runs (not `onnx_latency_ms`, which times one model alone), so ratios are paired."
    )


def _overhead_rows(s: Section, info: dict, t_pt: dict, t_own: dict, t_ort: dict, t_ov: dict, imgsz: int) -> list:
    """The table's rows, one per model, and each variant's overhead target added to ``s``."""
    rows = []
    for k in info:
        p, g = info[k]
        r_pt, r_ort, r_ov = (ratio_ci(t, k) for t in (t_pt, t_ort, t_ov))
        own = median_ms(t_own[k]) if k != "baseline" else None
        share = paired_ratio(t_own[k], t_pt["baseline"]) if k != "baseline" else None
        rows.append(
            [
                k,
                f"{p / 1e6:.3f}",
                fmt(g),
                fmt(median_ms(t_pt[k])),
                ratio_cell(r_pt),
                fmt(own),
                f"{share:+.1%}" if share is not None else None,
                fmt(median_ms(t_ort[k])) if t_ort else None,
                ratio_cell(r_ort),
                fmt(median_ms(t_ov[k])) if t_ov else None,
                ratio_cell(r_ov),
            ]
        )
        lim = VARIANTS[k].max_overhead if k in VARIANTS else None  # the baseline has none
        if lim is not None:
            ok = ("met" if r_pt[0] <= 1 + lim else "missed") if imgsz == 640 else "n/a (target is at 640)"
            s.targets.append(
                (
                    f"{k.upper()} overhead on yolo11n at {imgsz} ≤ {lim:.0%} (PyTorch)",
                    f"{overhead_text(r_pt)}; blocks' own time {share:+.1%}"
                    + (f"; ORT {overhead_text(r_ort)}" if r_ort else "")
                    + (f"; OpenVINO {overhead_text(r_ov)}" if r_ov else ""),
                    ok,
                    VARIANTS[k].hint if ok == "missed" else "",
                )
            )
    return rows


def blocks_section(cfg: dict) -> Section:
    """Section 2: latency overhead of each attention variant on yolo11n, PyTorch and onnxruntime, interleaved."""
    from ultralytics.utils.torch_utils import get_flops

    imgsz, rounds, threads = cfg["imgsz"], cfg["rounds"], cfg["threads"]
    s = Section(f"2. Block overhead on yolo11n at {imgsz} (batch 1)")
    yamls = detector_yamls(cfg["variants"])
    models, info = {}, {}
    for name, y in bar(yamls.items(), "bench blocks: building", total=len(yamls), unit="model"):
        m = build_detector(y).model.eval()
        m.fuse(verbose=False)
        info[name] = (sum(p.numel() for p in m.parameters()), get_flops(m, imgsz))
        models[name] = m
    x = torch.rand(1, 3, imgsz, imgsz)
    torch.set_num_threads(threads)
    clocks = {k: BlockClock(m, x) for k, m in models.items()}
    t_pt = interleaved_times({k: c.run for k, c in clocks.items()}, rounds)
    t_own = {k: c.seconds[-rounds:] for k, c in clocks.items()}  # the rounds after the warm-up, as t_pt
    t_ort, ort_note = _onnx_times(cfg, yamls, imgsz, threads, rounds)
    t_ov, ov_note = ({}, "OpenVINO not measured (openvino=False).")
    if cfg.get("openvino", True):
        t_ov, ov_note = _openvino_times(yamls, imgsz, threads, rounds, Path(cfg["cache"]))
    rows = _overhead_rows(s, info, t_pt, t_own, t_ort, t_ov, imgsz)
    s.body += [
        f"Fused (Conv+BN), eval, random weights, input 1×3×{imgsz}×{imgsz}, {threads} threads. Each "
        f"round runs every model once (round-robin, start rotated); {rounds} rounds after one warm-up round. "
        "Ratio = median over rounds of variant/baseline time from the same round, in brackets its 95% CI, "
        "distribution-free (order statistics of the per-round ratios, `scipy.stats.quantile_test`). Blocks' own "
        "ms: the time spent inside the attention blocks (forward hooks on the blocks, in the same runs), median "
        "over rounds; as share: "
        "median over rounds of that time / the baseline's time in the same round, the overhead without what the "
        "rest of the model does differently around the blocks (allocator state, cache). GFLOPs: Ultralytics' "
        f"`get_flops` at {imgsz}.",
        "",
        table(
            ["model", "params (M)", "GFLOPs", "PyTorch ms", "PyTorch × baseline (95% CI)", "blocks' own ms",
             "blocks' own, share", "ORT ms", "ORT × baseline (95% CI)", "OpenVINO ms", "OpenVINO × baseline (95% CI)"],
            rows,
        ),
        "",
        ort_note,
        "",
        ov_note,
    ]
    return s
