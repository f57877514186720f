"""Running an ablation: the dataset to train on, the plan of runs, scheduling them over devices, and resuming."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import statistics
import sys
import time
from pathlib import Path

import yaml

from attn_yolo.ablate.config import Ablation, apply_overrides, first_line, load_config, validate
from attn_yolo.ablate.records import RunSpec, new_record
from attn_yolo.ablate.report import duration, write_report
from attn_yolo.ablate.results import read_results, write_results
from attn_yolo.ablate.train import execute_run, first_run_estimate

UNFINGERPRINTED_TRAIN_KEYS = {"device", "plots", "verbose"}  # train args that do not change a run's result


def _read_only(folder: Path) -> bool:
    """True when ``folder`` cannot or should not be written: no access, or no write permission bit at all (a folder
    made read-only on purpose, which root could still write to)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return True
    return not os.access(folder, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def prepare_data(ab: Ablation) -> str:
    """Return the dataset YAML to train on; copies the dataset into ``out/data/<name>`` when ``copy_data`` says so.

    Ultralytics writes a labels ``*.cache`` next to each labels folder; ``copy_data: auto`` copies a dataset whose
    labels folders are read-only (like ../shared/data/coco128) so that nothing is written there.
    """
    from ultralytics.data.utils import check_det_dataset, img2label_paths

    info = check_det_dataset(ab.data, autodownload=False)
    splits = {k: info[k] for k in ("train", "val", "test") if info.get(k)}
    if ab.copy_data == "auto":
        label_dirs = [Path(img2label_paths([str(Path(p) / "x.jpg")])[0]).parent.parent for v in splits.values()
                      for p in (v if isinstance(v, list) else [v])]
        if not any(_read_only(d) for d in label_dirs if d.exists()):
            return ab.data
    elif not ab.copy_data:
        return ab.data
    root = Path(info["path"]).resolve()
    dest = ab.out / "data" / root.name
    target = dest / "data.yaml"
    if target.exists():
        return str(target)
    rel = {}
    for k, v in splits.items():
        rel[k] = []
        for p in v if isinstance(v, list) else [v]:
            p = Path(p).resolve()
            if not p.is_relative_to(root):
                raise ValueError(f"copy_data: {k} path {p} lies outside the dataset root {root}; set copy_data: false")
            rel[k].append(str(p.relative_to(root)))
        rel[k] = rel[k] if isinstance(v, list) else rel[k][0]
    print(f"attn-yolo ablate: copying dataset {root} -> {dest} (copy_data={ab.copy_data})", flush=True)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns("*.cache"))
    for f in dest.rglob("*"):  # the copy must be writable for Ultralytics' label cache
        f.chmod(f.stat().st_mode | stat.S_IWUSR)
    dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
    meta = {**yaml.safe_load(Path(ab.data).read_text()), "path": str(dest), **rel}
    target.write_text(yaml.safe_dump(meta, sort_keys=False))  # written last: marks the copy complete
    return str(target)


def plan(ab: Ablation, data: str) -> list[RunSpec]:
    """Every (variant, seed) run of the ablation, variant-major in config order."""
    train_id = {k: v for k, v in sorted(ab.train.items()) if k not in UNFINGERPRINTED_TRAIN_KEYS}
    specs = []
    for v in ab.variants:
        for seed in ab.seeds:
            key = json.dumps([v.definition, ab.data_id, train_id, seed], sort_keys=True, default=str)
            specs.append(RunSpec(
                variant=v.name, seed=seed, model=v.model, model_dict=v.model_dict, data=data, train=dict(ab.train),
                imgsz=ab.imgsz, latency=dict(ab.latency), run_dir=str(ab.out / "runs" / f"{v.name}-seed{seed}"),
                params=v.params, gflops=v.gflops, fingerprint=hashlib.sha256(key.encode()).hexdigest()[:16],
                trust=ab.trust,
            ))  # fmt: skip
    return specs


def _schedule(specs: list[RunSpec], devices: list, runner, on_start, on_done) -> None:
    """Run ``specs``: in this process when there is at most one device, else one worker process per device, each
    running one run at a time. ``on_start(spec, device)`` and ``on_done(row)`` are called in order per run."""
    if len(devices) <= 1:
        device = devices[0] if devices else None
        for spec in specs:
            on_start(spec, device)
            on_done(runner(spec, device))
        return

    import multiprocessing
    import queue
    import threading
    from concurrent.futures import ProcessPoolExecutor

    todo: queue.Queue = queue.Queue()
    for spec in specs:
        todo.put(spec)
    lock, stop = threading.Lock(), threading.Event()
    ctx = multiprocessing.get_context("spawn")  # CUDA-safe; each worker selects its own device
    pools = [ProcessPoolExecutor(1, mp_context=ctx) for _ in devices]

    def work(k: int, device: str) -> None:
        while not stop.is_set():
            try:
                spec = todo.get_nowait()
            except queue.Empty:
                return
            with lock:
                on_start(spec, device)
            try:
                row = pools[k].submit(runner, spec, device).result()
            except Exception as e:  # the worker process died (killed, segfault): record and replace it
                row = new_record(spec, device, error=f"worker process failed: {first_line(e)}")
                pools[k].shutdown(wait=False, cancel_futures=True)
                pools[k] = ProcessPoolExecutor(1, mp_context=ctx)
            except BaseException:  # Ctrl-C reached the worker
                stop.set()
                return
            with lock:
                on_done(row)

    threads = [threading.Thread(target=work, args=(k, d), daemon=True) for k, d in enumerate(devices)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        for p in pools:
            p.shutdown(wait=False, cancel_futures=True)


def run_ablation(ab: Ablation, runner=execute_run, started: float | None = None) -> int:
    """Run every unfinished run of ``ab``, recording each in results.csv as it ends, then write the report.

    Args:
        ab: validated ablation (``validate``).
        runner: ``runner(spec, device) -> row``; ``execute_run`` (replaceable for tests).
        started: ``time.perf_counter()`` when the command started (for the wall time in the summary).

    Returns:
        Exit code: 0 all runs ok, 1 some run failed, 130 interrupted (Ctrl-C).
    """
    t_start = time.perf_counter() if started is None else started
    ab.out.mkdir(parents=True, exist_ok=True)
    (ab.out / "config.yaml").write_text(yaml.safe_dump(ab.config, sort_keys=False))
    data = prepare_data(ab)
    specs = plan(ab, data)
    csv_path = ab.out / "results.csv"
    rows = {(r["variant"], r["seed"]): r for r in read_results(csv_path)}
    planned = {(s.variant, s.seed): s for s in specs}
    extra = [k for k in rows if k not in planned]
    if extra:
        print(f"attn-yolo ablate: {len(extra)} row(s) of results.csv are not in this config (kept, not summarised)")
    changed = [k for k, s in planned.items() if k in rows and rows[k]["fingerprint"] != s.fingerprint]
    if changed:
        print(f"attn-yolo ablate: {len(changed)} run(s) in results.csv used other settings (model, data, train args) "
              "and are redone; use another out= to keep both")
    todo = [s for s in specs
            if rows.get((s.variant, s.seed), {}).get("status") != "ok" or (s.variant, s.seed) in changed]
    done_before = len(specs) - len(todo)
    if done_before:
        print(f"attn-yolo ablate: {done_before}/{len(specs)} run(s) already finished in {csv_path}; skipping them")
    durations, begun, estimate = [], {}, {}
    n_workers = max(1, len(ab.devices))

    def ordered_rows() -> list[dict]:
        return [rows[k] for k in planned if k in rows] + [rows[k] for k in rows if k not in planned]

    def on_start(spec: RunSpec, device) -> None:
        k = done_before + len(begun) + 1
        begun[(spec.variant, spec.seed)] = time.perf_counter()
        left = len(todo) - len(durations)
        if durations:
            eta = duration(statistics.fmean(durations) * left / n_workers)
        else:  # before any run has ended: from the dataset size, the epochs and one timed training step
            if not estimate:
                try:
                    estimate["s"], estimate["basis"] = first_run_estimate(spec, ab.nc, device)
                except Exception as e:  # noqa: BLE001  an estimate must never stop the ablation
                    estimate["s"], estimate["basis"] = None, first_line(e, 120)
            eta = (f"~{duration(estimate['s'] * left / n_workers)} (estimated from {estimate['basis']}; measured "
                   "from run 1 on)" if estimate["s"] is not None else f"unknown until run 1 ends ({estimate['basis']})")
        dev = f" device={device}" if device is not None else ""
        print(f"\n[run {k}/{len(specs)}] variant={spec.variant} seed={spec.seed}{dev} — ETA {eta}", flush=True)

    def on_done(row: dict) -> None:
        key = (row["variant"], row["seed"])
        durations.append(time.perf_counter() - begun.get(key, time.perf_counter()))
        rows[key] = row
        write_results(csv_path, ordered_rows())
        msg = f"mAP50-95 {row['map50_95']:.4f}" if row["status"] == "ok" else f"FAILED: {row['error']}"
        print(f"[done] variant={row['variant']} seed={row['seed']}: {msg}", flush=True)

    code = 0
    try:
        _schedule(todo, ab.devices, runner, on_start, on_done)
    except KeyboardInterrupt:
        code = 130
        print(f"\nattn-yolo ablate: interrupted; {len(durations)} run(s) of this session recorded in {csv_path}. "
              "Run the same command again to continue.", file=sys.stderr, flush=True)
    rows = {(r["variant"], r["seed"]): r for r in read_results(csv_path)}  # the report reads what results.csv holds
    current = [rows[k] for k, s in planned.items() if k in rows and rows[k]["fingerprint"] == s.fingerprint]
    text = write_report(ab, current, time.perf_counter() - t_start)
    print("\n" + text)
    print(f"attn-yolo ablate: results in {ab.out} (results.csv, summary.md, ablation.png, curves.png)")
    if code == 0 and any(r["status"] != "ok" for r in current):
        code = 1
    return code


def run(config: str | Path | None = None, overrides: list[str] = (), runner=execute_run) -> int:
    """Load, override, validate (every problem at once, before any training) and run an ablation config."""
    started = time.perf_counter()
    raw, base, name, source = load_config(config)
    ab = validate(apply_overrides(raw, list(overrides)), base, name, source)
    return run_ablation(ab, runner=runner, started=started)
