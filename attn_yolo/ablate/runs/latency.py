"""Latency of an ablation's arms, timed after the runs apart from training, with an interval and the load.

Latency of an ablation's arms, timed apart from training: after the runs, in this one process, interleaved, with an
interval over repeated rounds, and not compared when the machine's load makes it meaningless.

Timed during training (each run timing its own best.pt while another worker trained), the same yolo11n read 47–106 ms
and blocks "made the model faster". Here every arm's ``best.pt`` (its first ok seed: latency depends on the
architecture, not on the seed's weights) is loaded once, fused, fp32, eval, batch 1, ``imgsz`` × ``imgsz``; then in
each of ``rounds`` rounds every arm is timed for ``number`` forwards with ``torch.utils.benchmark.Timer`` (which
synchronises CUDA and fixes the thread count), the arms' order rotated from round to round so that a drift of the
machine falls on every arm alike. An arm's Δ to the baseline is paired by round: its t-interval over the rounds
(``stats.paired_difference``) is the interval of the latency Δ.

The load: the machine's busy CPU time (``/proc/stat``) minus this process's own (``time.process_time``, all its
threads) over the timing's wall time is the cores other processes used meanwhile. From ``BUSY_CORES`` cores on, the
figures are recorded but not compared (the verdict says why). An arm whose fused model is the baseline's, layer by layer
and shape by shape, never gets a latency verdict: there is no difference to measure, whatever the clock says. A
difference within ``RESOLUTION`` of the baseline's time reads "no difference beyond ±x ms" even when its interval
excludes 0 (a few % is what CPU timing reproduces between sessions).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from attn_yolo.ablate.statistics.stats import CONFIDENCE, paired_difference
from attn_yolo.files import atomic_write
from attn_yolo.text import bracket

LATENCY_NAME = "latency.json"  # in the ablation's out folder
OWN = "attn-yolo ablate latency"  # the file's "by": only such a file is ever replaced or deleted
BUSY_CORES = 0.5  # cores used by other processes during the timing from which latencies are not compared
RESOLUTION = 0.03  # share of the baseline's time below which a latency difference is not a verdict
ROUND_FORWARDS = 10  # forwards per arm and round


def busy_cpu_s() -> float | None:
    """Seconds of CPU time the whole machine has spent busy since boot (all cores: ``/proc/stat``'s first line, less
    idle and iowait); None where there is no ``/proc/stat``."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    ticks = [int(x) for x in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class LoadMeter:
    """Context manager: the cores other processes kept busy while it was open (``others_cores``), and the load
    averages, ``cores`` the machine's; ``busy`` when ``others_cores >= BUSY_CORES``. ``reader`` returns the machine's
    busy CPU seconds (``busy_cpu_s``; replaceable for tests), ``own`` this process's."""

    def __init__(self, reader=busy_cpu_s, own=time.process_time, clock=time.perf_counter):
        self.reader, self.own, self.clock = reader, own, clock
        self.others_cores = math.nan

    def __enter__(self):
        self._t, self._busy, self._own = self.clock(), self.reader(), self.own()
        return self

    def __exit__(self, *exc):
        wall, busy, own = self.clock() - self._t, self.reader(), self.own() - self._own
        if self._busy is not None and busy is not None and wall > 0:
            self.others_cores = max(0.0, (busy - self._busy - own) / wall)
        return False

    @property
    def busy(self) -> bool:
        return math.isfinite(self.others_cores) and self.others_cores >= BUSY_CORES

    def describe(self) -> dict:
        return {"others_cores": self.others_cores, "cores": os.cpu_count(), "busy": self.busy,
                "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}  # fmt: skip


def load_fused(weights, device=None, sdpa: bool = False):
    """A checkpoint's model as timed: weights-only load, fused, eval, fp32, on ``device`` (Ultralytics' device
    string)."""
    from ultralytics.utils.torch_utils import select_device

    from attn_yolo.checkpoint import load_model
    from attn_yolo.sdpa import fuse_attention

    dev = select_device(str(device or "").split(",")[0], verbose=False)
    model = load_model(weights, "weights", suffixes=(".pt",)).fuse(verbose=False).eval().float().to(dev)
    if sdpa:
        fuse_attention(model)
    return model


def architecture(model) -> tuple:
    """The layer-by-layer signature of a model (module types and parameter shapes): equal signatures, the same
    computation (the latency Δ of two such arms is noise)."""
    return tuple((type(m).__name__, tuple(tuple(p.shape) for p in m.parameters(recurse=False)))
                 for m in model.modules())


def time_rounds(models: dict, imgsz: int, rounds: int = 5, number: int = ROUND_FORWARDS, warmup: int = 10
                ) -> tuple[dict[str, list[float]], LoadMeter]:
    """Per model, its mean forward time in ms in each of ``rounds`` interleaved rounds (order rotated every round),
    after ``warmup`` untimed forwards each; with the ``LoadMeter`` of the whole timing. Batch 1, ``imgsz`` square,
    no grad.

    Raises:
        ValueError: no model, or ``rounds`` / ``number`` < 1.
    """
    import logging

    import torch

    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # its "No CUDA runtime" line on import
    from torch.utils.benchmark import Timer

    if not models or rounds < 1 or number < 1:
        raise ValueError(f"time_rounds needs models, rounds >= 1 and number >= 1, got {len(models)}, {rounds}, "
                         f"{number}")
    names = list(models)
    inputs = {k: torch.zeros(1, 3, imgsz, imgsz, device=next(m.parameters()).device) for k, m in models.items()}
    timers = {k: Timer("m(x)", globals={"m": models[k], "x": inputs[k]}, num_threads=torch.get_num_threads())
              for k in names}  # fmt: skip
    out = {k: [] for k in names}
    with torch.inference_mode():
        for k in names:
            for _ in range(warmup):
                models[k](inputs[k])
        with LoadMeter() as meter:
            for r in range(rounds):
                for k in names[r % len(names):] + names[: r % len(names)]:
                    out[k].append(timers[k].timeit(number).mean * 1e3)
    return out, meter


def compare(times: dict[str, list[float]], baseline: str, load: dict, same: set[str] = frozenset(),
            confidence: float = CONFIDENCE) -> dict:
    """Each arm's latency Δ to ``baseline`` (ms, paired by round) with its t-interval and its words: ``lower`` /
    ``higher``, ``no difference beyond ±x ms``, or ``not compared (...)`` when ``load["busy"]`` or the arm is in
    ``same`` (the baseline's architecture)."""
    import statistics

    base = statistics.median(times[baseline])
    out = {}
    for arm, t in times.items():
        if arm == baseline:
            continue
        d = paired_difference([a - b for a, b in zip(t, times[baseline])], confidence)
        if arm in same:
            words = "not compared: the same architecture as the baseline (no difference to measure)"
        elif load["busy"]:
            words = (f"not compared: the machine was busy (other processes used {load['others_cores']:.1f} of "
                     f"{load['cores']} cores during the timing)")
        elif not math.isfinite(d["lo"]):
            words = "n/a (needs >= 2 rounds)"
        elif (d["lo"] > 0 or d["hi"] < 0) and abs(d["mean"]) >= RESOLUTION * base:
            words = "higher" if d["lo"] > 0 else "lower"
        else:
            w = max(abs(d["lo"]), abs(d["hi"]), RESOLUTION * base)
            words = f"no difference beyond ±{w:.2f} ms"
        out[arm] = {**d, "words": words, "verdict": words in ("higher", "lower")}
    return out


def measure(ab, rows: list[dict], say=print) -> dict | None:
    """Time every arm that has an ok run with a ``best.pt`` (``time_rounds``), compare with the baseline
    (``compare``) and write ``out/latency.json``; None (and a file of its own removed) when the baseline has no such
    run. ``ab.latency``: ``repeats`` forwards per arm in rounds of ``ROUND_FORWARDS`` (at least 3 rounds),
    ``warmup``. A rerun whose weights and settings are unchanged (``key``: each best.pt's size and modification
    time) reuses the file instead of timing again."""
    path = Path(ab.out) / LATENCY_NAME
    weights = {}
    for v in ab.variants:
        ok = sorted((r for r in rows if r["variant"] == v.name and r["status"] == "ok"), key=lambda r: r["seed"])
        best = next((Path(r["run_dir"]) / "weights" / "best.pt" for r in ok
                     if (Path(r["run_dir"]) / "weights" / "best.pt").is_file()), None)
        if best is not None:
            weights[v.name] = best
    if ab.baseline not in weights or len(weights) < 2:
        if read(ab.out) is not None:
            path.unlink()
        return None
    device = (ab.devices[0] if ab.devices else None) or ab.train.get("device")
    rounds = max(3, int(ab.latency.get("repeats", 50)) // ROUND_FORWARDS)
    key = [ab.imgsz, str(device), rounds, int(ab.latency.get("warmup", 10)), bool(ab.sdpa)] + [
        [k, os.path.relpath(w, ab.out), w.stat().st_size, w.stat().st_mtime_ns] for k, w in sorted(weights.items())]
    if (old := read(ab.out)) is not None and old.get("key") == key:
        return old  # the same weights timed the same way: a rerun prints the same figures
    try:
        models = {k: load_fused(w, device, bool(ab.sdpa)) for k, w in weights.items()}
        times, meter = time_rounds(models, ab.imgsz, rounds, ROUND_FORWARDS, int(ab.latency.get("warmup", 10)))
    except Exception as e:  # noqa: BLE001  timing never fails an ablation: its runs and verdicts stand
        if read(ab.out) is not None:
            path.unlink()
        say(f"attn-yolo ablate: latency: not timed ({type(e).__name__}: {' '.join(str(e).split())[:160]})")
        return None
    load = meter.describe()
    sig = architecture(models[ab.baseline])
    same = {k for k, m in models.items() if k != ab.baseline and architecture(m) == sig}
    import statistics

    result = {"by": OWN, "key": key, "imgsz": ab.imgsz, "device": str(device or "auto"), "rounds": rounds,
              "forwards_per_round": ROUND_FORWARDS, "load": load,
              "arms": {k: {"median_ms": statistics.median(t), "rounds_ms": t,
                           "weights": os.path.relpath(weights[k], ab.out)} for k, t in times.items()},
              "diffs": compare(times, ab.baseline, load, same)}  # fmt: skip
    atomic_write(path, lambda p: Path(p).write_text(json.dumps(result, indent=1)))
    busy = (f"; the machine was busy (other processes used {load['others_cores']:.1f} of {load['cores']} cores): "
            "recorded, not compared") if load["busy"] else ""
    say(f"attn-yolo ablate: latency: {len(weights)} arms timed after the runs, apart from training ({rounds} "
        f"interleaved rounds of {ROUND_FORWARDS} forwards, batch 1, imgsz {ab.imgsz}){busy}")
    return result


def read(out) -> dict | None:
    """``out/latency.json`` as ``measure`` wrote it, None when absent or not its own."""
    try:
        data = json.loads((Path(out) / LATENCY_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("by") == OWN else None


def cost_words(result: dict | None, arm: str) -> str | None:
    """The latency part of an arm's cost line: ``latency +0.42 ms [+0.30, +0.55] (higher)``, or its ``not
    compared`` words; None without a timing of the arm."""
    d = (result or {}).get("diffs", {}).get(arm)
    if d is None:
        return None
    iv = f" {bracket(d['lo'], d['hi'], 2)}" if math.isfinite(d["lo"]) else ""
    return f"latency {d['mean']:+.2f} ms{iv} ({d['words']})"


def summary_lines(baseline: str, timing: dict | None) -> list[str]:
    """The summary's latency section: each arm's batch-1 forward time, timed after the runs apart from training
    (``measure``), its Δ to the baseline with the interval over the rounds, and the load."""
    if not timing:
        return []
    load = timing["load"]
    cores = (f"other processes used {load['others_cores']:.2f} of {load['cores']} cores during the timing"
             if math.isfinite(load["others_cores"]) else "the machine's load could not be read")
    avg = f", load average {load['loadavg'][0]:.2f}" if load.get("loadavg") else ""
    lines = ["", "## Latency (timed after the runs, apart from training)", "",
             (f"Batch 1, imgsz {timing['imgsz']}, fused fp32 best.pt of each arm's first seed, device "
              f"{timing['device']}: {timing['rounds']} interleaved rounds of {timing['forwards_per_round']} forwards "
              f"(torch.utils.benchmark); Δ paired by round, {int(CONFIDENCE * 100)}% t-interval over the rounds; "
              f"{cores}{avg}" + (" — **too busy: latencies are recorded, not compared**." if load["busy"] else ".")),
             ""]
    base = timing["arms"].get(baseline, {})
    if base:
        lines.append(f"- `{baseline}` (baseline): {base['median_ms']:.2f} ms (median of the rounds)")
    for arm in timing["diffs"]:
        lines.append(f"- `{arm}`: {timing['arms'][arm]['median_ms']:.2f} ms; {cost_words(timing, arm)}")
    return lines
