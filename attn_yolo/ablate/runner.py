"""Running an ablation: the lock on out, the dataset, the plan of runs, resuming from the run records, the report."""

from __future__ import annotations

import dataclasses
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

from attn_yolo.ablate import console, latency, outdir, readings, rerun, tracking
from attn_yolo.ablate.config import Ablation, ConfigError, apply_overrides, first_line, from_command_line, load_config
from attn_yolo.ablate.outdir import DATA_MARKER, RUN_MARKER, OutLock, check_out, check_replaceable, claim, claim_out
from attn_yolo.ablate.plots import is_own_plot
from attn_yolo.ablate.prepare import prepare
from attn_yolo.ablate.records import RunSpec, complete, write_record
from attn_yolo.ablate.report import duration, write_report
from attn_yolo.ablate.results import check_index, collect_records, write_results
from attn_yolo.ablate.scheduling import exit_code, schedule_local, schedule_ray, stop_on_signals
from attn_yolo.ablate.start import arm_start, pending, start_spec
from attn_yolo.ablate.train import execute_run, first_run_estimate
from attn_yolo.ablate.treatment import NewBlocks
from attn_yolo.ablate.validate import validate
from attn_yolo.checkpoint import atomic_write

UNFINGERPRINTED_TRAIN_KEYS = {"device", "plots", "verbose"}  # train args that do not change a run's result


def _read_only(folder: Path) -> bool:
    """True when ``folder`` cannot or should not be written: no access, or no write permission bit at all (a folder
    made read-only on purpose, which root could still write to)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return True
    return not os.access(folder, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def data_copy(ab: Ablation) -> tuple[dict, Path | None]:
    """The dataset's ``check_det_dataset`` info and where ``copy_data`` copies it, ``out/data/<dataset folder
    name>`` (None: trained where it is). ``copy_data: auto`` copies a dataset whose labels folders are read-only."""
    from ultralytics.data.utils import check_det_dataset, img2label_paths

    info = check_det_dataset(ab.data, autodownload=False)
    if ab.copy_data == "auto":
        label_dirs = [Path(img2label_paths([str(Path(p) / "x.jpg")])[0]).parent.parent
                      for k in ("train", "val", "test") if info.get(k)
                      for p in (info[k] if isinstance(info[k], list) else [info[k]])]
        if not any(_read_only(d) for d in label_dirs if d.exists()):
            return info, None
    elif not ab.copy_data:
        return info, None
    return info, ab.out / "data" / Path(info["path"]).resolve().name


def prepare_data(ab: Ablation) -> str:
    """Return the dataset YAML to train on; copies the dataset into ``out/data/<name>`` when ``copy_data`` says so.

    Ultralytics writes a labels ``*.cache`` next to each labels folder; ``copy_data: auto`` copies a dataset whose
    labels folders are read-only (like ../shared/data/coco128) so that nothing is written there. The copy holds a
    marker file; an ``out/data/<name>`` without it is never used nor replaced.

    Raises:
        UsageError: ``out/data/<name>`` exists but the runner did not create it.
    """
    info, dest = data_copy(ab)
    if dest is None:
        return ab.data
    splits = {k: info[k] for k in ("train", "val", "test") if info.get(k)}
    target = dest / "data.yaml"
    check_replaceable(dest, DATA_MARKER)
    root = Path(info["path"]).resolve()
    if target.exists():  # written last: the copy is complete
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
    print(console.phase_line("dataset", f"copying {root} -> {dest} (copy_data={ab.copy_data})"), flush=True)
    claim(dest, DATA_MARKER, {"source": str(root)})
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns("*.cache"), dirs_exist_ok=True)
    for f in dest.rglob("*"):  # the copy must be writable for Ultralytics' label cache
        f.chmod(f.stat().st_mode | stat.S_IWUSR)
    dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
    meta = {**yaml.safe_load(Path(ab.data).read_text()), "path": str(dest), **rel}
    atomic_write(target, lambda p: Path(p).write_text(yaml.safe_dump(meta, sort_keys=False)))  # last: copy complete
    return str(target)


def plan(ab: Ablation, data: str) -> list[RunSpec]:
    """Every (variant, seed) run of the ablation, variant-major in config order (with a seed rule: every seed it may
    run, 0 .. max − 1; the rounds pick from them). A warm-started run starts from its start's weights, and its
    fingerprint covers the start's. ``ab`` is prepared first where it is not yet (``prepare``: dataset, builds)."""
    prepare(ab)
    train_id = {k: v for k, v in sorted(ab.train.items()) if k not in UNFINGERPRINTED_TRAIN_KEYS}
    specs = []
    for v in ab.variants:
        begin = arm_start(ab, v.name)
        nb = v.block_training or ab.new_blocks or NewBlocks()
        how = {"new_blocks": dataclasses.asdict(nb)} if v.new_blocks else {}  # changes only arms with new blocks
        for seed in ab.seeds:
            parts = [v.definition, ab.data_id, train_id, seed] + ([begin.fingerprint] if begin else []) + (
                [how] if how else [])
            key = json.dumps(parts, sort_keys=True, default=str)
            specs.append(RunSpec(
                variant=v.name, seed=seed, model=v.model, model_dict=v.model_dict, data=data, train=dict(ab.train),
                imgsz=ab.imgsz, latency=dict(ab.latency), run_dir=str(ab.out / "runs" / f"{v.name}-seed{seed}"),
                params=v.params, gflops=v.gflops, fingerprint=hashlib.sha256(key.encode()).hexdigest()[:16],
                trust=ab.trust, health=ab.health, start=begin.weights if begin else None,
                new_blocks=v.new_blocks or None, lr_mult=nb.lr_mult, gamma=nb.gamma if begin else 0.0,
            ))  # fmt: skip
    return specs


def _warn(msg: str) -> None:
    print(f"attn-yolo ablate: warning: {msg}", file=sys.stderr, flush=True)


def describe(ab: Ablation, n_todo: int, cwd: Path | None = None) -> list[str]:
    """The plan printout: runs, where they execute, and ``out`` (saying so when it lies outside the working
    directory ``cwd``)."""
    cwd = Path.cwd() if cwd is None else cwd
    n = len(ab.variants) * len(ab.seeds)
    if ab.backend == "ray":
        how = (f"backend ray ({f'cluster {ab.ray_address}' if ab.ray_address else 'a local Ray instance'}), per run "
               + ", ".join(f"{k}={v}" for k, v in ab.resources.items()))
    elif len(ab.devices) > 1:
        how = f"backend local, {len(ab.devices)} worker processes on devices {', '.join(map(str, ab.devices))}"
    else:
        dev = ab.devices[0] if ab.devices else ab.train.get("device", "auto")
        how = f"backend local, one run at a time in this process (device {dev})"
    where = "" if ab.out.is_relative_to(cwd.resolve()) else f" (outside the working directory {cwd})"
    rule = ab.seed_rule
    seeds = (f"seeds chosen by the data ({rule.min} to {rule.max} paired seeds, in rounds)" if rule else
             f"{len(ab.seeds)} seed(s) = {n} run(s)")
    todo = f"at most {n_todo} to run" if rule else f"{n_todo} to run"
    start = ab.start.describe() if ab.start else "from scratch (no `start`: each arm from its own initialisation)"
    if ab.start and ab.new_blocks:
        start += f"; {ab.new_blocks.describe()}"
    return [f"attn-yolo ablate: {ab.name}: {len(ab.variants)} variant(s) x {seeds}, {todo}; {how}",
            f"attn-yolo ablate: design: {start}", f"attn-yolo ablate: out={ab.out}{where}"]


def run_ablation(ab: Ablation, runner=execute_run, started: float | None = None, redo: bool = False,
                 overwrite: bool = False) -> int:
    """Prepare ``ab`` (``prepare``: the dataset generated, every arm built; its problems raised before any training),
    then run every unfinished run, recording each in its run folder and in results.csv as it ends, then write the
    report. Holds the lock on ``ab.out`` throughout; SIGINT/SIGTERM stop the runs (finished ones are kept).

    Args:
        ab: validated ablation (``validate``).
        runner: ``runner(spec, device) -> row``; ``execute_run`` (replaceable for tests; picklable for parallel and
            Ray runs).
        started: ``time.perf_counter()`` when the command started (for the wall time in the summary).
        redo: redo finished runs whose settings changed (each old run folder is replaced only once its new run has
            finished); without it such runs stop the ablation before any work (``rerun.check_changed``).
        overwrite: write into an existing ``out`` that the runner did not create (``outdir.check_out``): files of
            the runner's own names there are replaced, nothing else is deleted; without it such an ``out`` is
            refused before anything is built or written.

    Returns:
        Exit code: 0 all runs ok, 1 some run failed, 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM).

    Raises:
        ConfigError: an arm does not build (``prepare``).
        UsageError: ``out`` exists, holds files and is not the runner's (unless ``overwrite``), another ablation
            holds ``out``, a file or folder the runner did not create is where it writes,
            or finished runs used other settings and not ``redo``.
    """
    t_start = time.perf_counter() if started is None else started
    check_out(ab.out, overwrite)  # before anything is built or written
    fired = []  # signals received
    with stop_on_signals(fired), console.quiet_ultralytics(bool(ab.train.get("verbose"))):
        prepare(ab)  # SIGINT even where the parent left it ignored (`cmd &` in a script); the CLI says it in one line
    try:
        with stop_on_signals(fired), OutLock(ab.out):
            return _run_locked(ab, runner, t_start, fired, redo)
    except KeyboardInterrupt as e:  # before or after the runs (during them, _run_locked reports and returns)
        print(f"\nattn-yolo ablate: interrupted ({e}); run the same command again to continue", file=sys.stderr)
        return exit_code(fired)


def _run_locked(ab: Ablation, runner, t_start: float, fired: list, redo: bool = False) -> int:
    csv_path = ab.out / "results.csv"
    verbose = bool(ab.train.get("verbose"))
    specs = plan(ab, ab.data)
    records, problems = collect_records(ab.out)
    for msg in problems:
        _warn(msg)
    rows = {(r["variant"], r["seed"]): r for r in records}
    planned = {(s.variant, s.seed): s for s in specs}

    def ordered_rows() -> list[dict]:
        return [rows[k] for k in planned if k in rows] + [rows[k] for k in rows if k not in planned]

    if msg := check_index(csv_path, ordered_rows()):
        _warn(msg)
    extra = [k for k in rows if k not in planned]
    if extra:
        print(f"attn-yolo ablate: {len(extra)} run record(s) in {ab.out / 'runs'} are not in this config (kept, not "
              "summarised)")
    changed = [k for k, s in planned.items() if k in rows and rows[k]["fingerprint"] != s.fingerprint]
    finished = [k for k in changed if rows[k]["status"] == "ok"]
    rerun.check_changed(ab.out, finished, rerun.previous_config(ab.out), outdir.portable(ab.config),
                        UNFINGERPRINTED_TRAIN_KEYS, redo)
    if finished:
        print(f"attn-yolo ablate: redo=True: {len(finished)} finished run(s) used other settings; each is replaced "
              f"once its new run has finished (trained in {ab.out / rerun.STAGING})")
    todo = [rerun.stage(s, ab.out) if (s.variant, s.seed) in finished else s for s in specs
            if rows.get((s.variant, s.seed), {}).get("status") != "ok" or (s.variant, s.seed) in changed]
    staged = {(s.variant, s.seed): s.run_dir for s in todo if (s.variant, s.seed) in finished}
    for line in describe(ab, len(todo)):
        print(line)
    done_before = len(specs) - len(todo)
    if done_before:
        print(f"attn-yolo ablate: {done_before}/{len(specs)} run(s) already finished in {ab.out / 'runs'}; skipping "
              "them")
    for s in todo:  # before any work: never replace what the runner did not create
        check_replaceable(Path(s.run_dir), RUN_MARKER)
    for st in pending(ab):
        check_replaceable(Path(st.folder), RUN_MARKER)
    if (dest := data_copy(ab)[1]) is not None:
        check_replaceable(dest, DATA_MARKER)
    claim_out(ab.out)  # every check passed: the first writes
    atomic_write(ab.out / "config.yaml",
                 lambda p: Path(p).write_text(yaml.safe_dump(outdir.portable(ab.config), sort_keys=False)))
    data = prepare_data(ab)
    uri = tracking.tracking_uri(ab.out, ab.name) if tracking.mlflow_enabled() else None
    todo = [dataclasses.replace(s, data=data, env=tracking.run_env(ab.name, f"{s.variant}-seed{s.seed}", uri, ab.out)
                                if uri else {}) for s in todo]  # fmt: skip
    write_results(csv_path, ordered_rows())
    durations, begun, estimate, ended = [], {}, {}, set()
    n_workers = max(1, len(ab.devices))
    progress = console.Progress(len(todo), verbose)

    def on_start(spec: RunSpec, device) -> None:
        key = (spec.variant, spec.seed)
        claim(Path(spec.run_dir), RUN_MARKER, {"variant": spec.variant, "seed": spec.seed})
        if key not in staged:
            rows.pop(key, None)  # its old record went with the folder (a staged redo keeps it until it has finished)
        k = done_before + len(begun) + 1
        begun[key] = time.perf_counter()
        if ab.backend == "ray":
            progress.running(f"{len(begun)} run(s) submitted to Ray")
            return
        left = len(todo) - len(durations)
        if durations:
            eta = duration(statistics.fmean(durations) * left / n_workers)
        else:  # before any run has ended: from the dataset size, the epochs and one timed training step
            if not estimate:
                try:
                    with console.quiet_ultralytics(verbose):
                        estimate["s"], estimate["basis"] = first_run_estimate(spec, ab.nc, device)
                except Exception as e:  # noqa: BLE001  an estimate must never stop the ablation
                    estimate["s"], estimate["basis"] = None, first_line(e, 120)
            eta = (f"~{duration(estimate['s'] * left / n_workers)} (estimated from {estimate['basis']}; measured "
                   "from run 1 on)" if estimate["s"] is not None else f"unknown until run 1 ends ({estimate['basis']})")
        dev = f" device={device}" if device is not None else ""
        progress.running(f"[run {k}/{len(specs)}] variant={spec.variant} seed={spec.seed}{dev}", eta)

    def on_done(row: dict) -> None:
        key = (row["variant"], row["seed"])
        ended.add(key)
        durations.append(time.perf_counter() - begun.get(key, time.perf_counter()))
        if key in staged:  # a redo: its folder replaces the old one only now that it has finished
            row = rerun.promote(complete(row), staged[key], planned[key].run_dir)
        else:
            row = complete({**row, "run_dir": planned[key].run_dir})  # the record lives in the run folder
            write_record(row)
        rows[key] = row
        write_results(csv_path, ordered_rows())
        msg = f"mAP50-95 {row['map50_95']:.4f}" if row["status"] == "ok" else f"FAILED: {row['error']}"
        host = f" on {row.get('host')}" if ab.backend == "ray" else ""
        took = duration(durations[-1])
        log = Path(planned[key].run_dir) / console.LOG_NAME
        progress.done(f"[done {len(durations)}/{len(todo)}] variant={row['variant']} seed={row['seed']}{host}: {msg} "
                      f"({took}; log {log})")

    def schedule(batch: list[RunSpec], start=on_start, done=on_done) -> None:
        if ab.backend == "ray":
            schedule_ray(batch, ab.ray_address, ab.resources, logged, start, done)
        else:
            schedule_local(batch, ab.devices, logged, start, done)

    code = 0
    logged = console.LoggedRunner(runner, verbose)
    try:
        if not train_starts(ab, data, progress, schedule):
            code = 1
        elif ab.seed_rule is None:
            schedule(todo)
        else:
            run_rounds(ab, todo, rows, planned, schedule, n_workers, progress.line)
    except KeyboardInterrupt:
        progress.close()
        code = exit_code(fired)
        print(f"\nattn-yolo ablate: {'terminated' if code == 143 else 'interrupted'}; {len(durations)} run(s) of "
              f"this session recorded in {ab.out / 'runs'}. {console.interrupted_words(begun, ended, planned)}Run "
              "the same command again to continue.", file=sys.stderr, flush=True)
    progress.close()
    write_results(csv_path, ordered_rows())
    current = [rows[k] for k, s in planned.items() if k in rows and rows[k]["fingerprint"] == s.fingerprint]
    if code not in (130, 143):  # after the runs, one process: latency timed apart from training
        latency.measure(ab, current)
    text = write_report(ab, current, time.perf_counter() - t_start)
    print("\n" + (text if verbose else lead(text)))
    if uri:
        try:
            run_id = tracking.log_summary(ab.name, uri, ab.out, [ab.out / "summary.md", csv_path])
            print(f"attn-yolo ablate: MLflow experiment {tracking.experiment_name(ab.name)!r} at {uri}: runs "
                  f"<variant>-seed<k> tagged {tracking.OUT_TAG}={ab.out}, summary.md and results.csv in run {run_id}")
        except Exception as e:  # tracking never fails an ablation
            _warn(f"MLflow: could not log the summary: {e}")
    plots = ", ".join(p for p in ("ablation.png", "curves.png", "delta.png") if is_own_plot(ab.out / p))
    print(f"attn-yolo ablate: results in {ab.out} (results.csv, summary.md{', ' + plots if plots else ''}; each run's "
          f"full Ultralytics output: runs/<run>/{console.LOG_NAME})")
    if code == 0 and any(r["status"] != "ok" for r in current):
        code = 1
    return code


def train_starts(ab: Ablation, data: str, progress, schedule) -> bool:
    """Train the recipe starts that have no usable record yet (``attn_yolo.ablate.start``) before any arm, through the
    same scheduler as the arms; False when one failed (no arm can start from it)."""
    ok = True
    for st in pending(ab):
        spec = dataclasses.replace(start_spec(ab, st, data), data=data)

        def begin(spec: RunSpec, device, st=st) -> None:
            claim(Path(spec.run_dir), RUN_MARKER, {"variant": spec.variant, "seed": spec.seed, "start": True})
            progress.enter("start", f"training the {'shared ' * (not st.arm)}start once ({spec.variant})")

        def end(row: dict, spec=spec, st=st) -> None:
            nonlocal ok
            row = complete({**row, "run_dir": spec.run_dir})
            write_record(row)
            if row["status"] == "ok":
                progress.line(f"[{row['variant']}] trained once: mAP50-95 {row['map50_95']:.4f}; reused by every arm "
                              f"and rerun while its settings (fingerprint {st.fingerprint}) stay the same")
            else:
                ok = False
                print(f"[{row['variant']}] FAILED: {row['error']} (see {spec.run_dir}/error.txt); no arm can start "
                      "from it", file=sys.stderr, flush=True)

        schedule([spec], begin, end)
    return ok


def progress(dec: dict, paired: int, next_seeds: list[int], minimum: int) -> str:
    """The line between rounds of seeds chosen by the data: what is undecided and which seeds run next."""
    going = [a for a, d in dec["variants"].items() if not d["stop"]]
    nxt = f"seed{'s' * (len(next_seeds) != 1)} {', '.join(map(str, next_seeds))}"
    if paired < minimum:
        return f"{paired} of the rule's minimum {minimum} paired seeds done; running {nxt}"
    return f"{', '.join(going)} not decided after {paired} paired seeds; running {nxt}"


def run_rounds(ab: Ablation, todo: list[RunSpec], rows: dict, planned: dict, schedule, n_workers: int,
               say=print) -> dict:
    """Seeds chosen by the data: run paired seeds in rounds (every arm of a seed), and after each round ask the
    stopping rule (``readings.decision``) whether to go on. The first round brings the paired seeds up to the rule's
    ``min``; later rounds add as many seeds as the workers hold at once (one, in this process), for the arms still
    undecided (and the baseline): an arm whose comparison stopped runs no more seeds. Seeds already
    finished (a rerun) count without running again; a seed with a failed run is not paired and the next one is
    tried. ``say`` prints a line (above the progress bar). Returns the last decision."""
    from attn_yolo.ablate.report import analyze

    arms = [v.name for v in ab.variants]
    left = {s: [sp for sp in todo if sp.seed == s] for s in ab.seeds}
    per_round = max(1, -(-n_workers // len(arms)))
    resampled: dict = {}  # each run's bootstrap, computed once over all rounds
    while True:
        current = [rows[k] for k, sp in planned.items() if k in rows and rows[k]["fingerprint"] == sp.fingerprint]
        dec = readings.decision(ab, current, analyze(ab, current, cache=resampled))
        paired = dec["n"]
        if dec["stop"]:
            say(f"attn-yolo ablate: seeds: {dec['text']}")
            return dec
        want = max(per_round, ab.seed_rule.min - paired)
        batch_seeds = [s for s in ab.seeds if left[s]][:want]
        if not batch_seeds:  # every seed up to max was tried: failed runs left fewer pairs than the rule asks
            say(f"attn-yolo ablate: seeds: all {len(ab.seeds)} seeds tried; {paired} paired")
            return dec
        say(f"attn-yolo ablate: seeds: {progress(dec, paired, batch_seeds, ab.seed_rule.min)}")
        done = {a for a, d in dec["variants"].items() if d["stop"]}  # decided: no more seeds (sequential.first_stop)
        batch = [sp for s in batch_seeds for sp in left[s] if sp.variant not in done]
        for s in batch_seeds:
            left[s] = []
        schedule(batch)


def run(config: str | Path | None = None, overrides: list[str] = (), runner=execute_run) -> int:
    """Load, override, validate (every problem at once, cheap) and run an ablation config (``run_ablation``: the
    builds, then the runs)."""
    started = time.perf_counter()
    overrides, flags = rerun.split_flags(list(overrides))
    raw, base, name, source = load_config(config)
    raw = rerun.default_out(apply_overrides(raw, overrides), overrides, name)
    verbose = bool((raw.get("train") or {}).get("verbose")) if isinstance(raw.get("train"), dict) else False
    with console.quiet_ultralytics(verbose):
        try:
            ab = validate(raw, base, name, source)
        except ConfigError as e:  # say which problems came from the command line, not from the file
            raise ConfigError(source, from_command_line(e.problems, overrides)) from None
    return run_ablation(ab, runner=runner, started=started, **flags)


def lead(summary: str) -> str:
    """The head of summary.md for the terminal: the title, setup and verdicts with their power, up to the first
    table (the rest is in summary.md)."""
    head = summary.split("\n## Results")[0].rstrip()
    return head + "\n\n(tables, per-class Δ and how the intervals are made: summary.md)"
