"""Running an ablation: the lock on out, the dataset, the plan of runs, resuming from the run records, the report."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

import yaml

from attn_yolo.ablate.runs import console, latency, outdir, rerun, tracking

from attn_yolo.ablate.statistics import comparisons
from attn_yolo.ablate.config.ablation import Ablation, ConfigError, apply_overrides, from_command_line, load_config
from attn_yolo.ablate.runs.outdir import DATA_MARKER, RUN_MARKER, OutLock, check_out, check_replaceable, claim, claim_out
from attn_yolo.ablate.reports.plots import is_own_plot
from attn_yolo.ablate.runs.prepare import prepare
from attn_yolo.ablate.runs.records import RunSpec, complete, write_record
from attn_yolo.ablate.reports.report import write_report
from attn_yolo.ablate.runs.results import check_index, collect_records, write_results
from attn_yolo.ablate.runs.scheduling import exit_code, stop_on_signals
from attn_yolo.ablate.runs.session import Session
from attn_yolo.ablate.runs.start import arm_start, pending, start_spec, too_weak
from attn_yolo.ablate.runs.train import execute_run
from attn_yolo.ablate.statistics.treatment import NewBlocks
from attn_yolo.ablate.config.validate import validate
from attn_yolo.args import UsageError
from attn_yolo.files import atomic_write

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
    name>`` (None: trained where it is). ``copy_data: auto`` copies a dataset whose labels folders are read-only.

    Raises:
        UsageError: the dataset YAML or its images are gone since the config was checked (one line, naming it).
    """
    from ultralytics.data.utils import check_det_dataset, img2label_paths

    try:
        info = check_det_dataset(ab.data, autodownload=False)
    except OSError as e:  # usable when the config was checked (validate): moved or deleted since
        said = (str(e).strip().splitlines() or [type(e).__name__])[0]  # Ultralytics adds a line on its settings
        raise UsageError(f"attn-yolo ablate: data: {ab.data} is no longer usable (it was when the config was "
                         f"checked): {said}; restore it, or give data= a dataset that stays") from None
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
    if ab.sdpa:  # it changes the numbers: in the fingerprint as the config gives it (train.sdpa)
        train_id["sdpa"] = True
    specs = []
    for v in ab.variants:
        begin = arm_start(ab, v.name)
        nb = v.block_training or ab.new_blocks or NewBlocks()
        how = {"new_blocks": dataclasses.asdict(nb)} if v.new_blocks else {}  # changes only arms with new blocks
        probe = nb.probe_steps if v.new_blocks else (ab.new_blocks or NewBlocks()).probe_steps  # baseline: held still
        if probe and not v.new_blocks:
            how = {"probe_steps": probe}
        for seed in ab.seeds:
            parts = [v.definition, ab.data_id, train_id, seed] + ([begin.fingerprint] if begin else []) + (
                [how] if how else [])
            key = json.dumps(parts, sort_keys=True, default=str)
            specs.append(RunSpec(
                variant=v.name, seed=seed, model=v.model, model_dict=v.model_dict, data=data, train=dict(ab.train),
                run_dir=str(ab.out / "runs" / f"{v.name}-seed{seed}"),
                params=v.params, gflops=v.gflops, fingerprint=hashlib.sha256(key.encode()).hexdigest()[:16],
                trust=ab.trust, health=ab.health, start=begin.weights_for(seed) if begin else None,
                new_blocks=v.new_blocks or None, lr_mult=nb.lr_mult, gamma=nb.gamma if begin else 0.0, sdpa=ab.sdpa,
                probe_steps=probe, probe_lr_mult=nb.probe_lr_mult,
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
                 overwrite: bool = False, rounds=None, report=None, lines=None, budget=(None, None)) -> int:
    """Prepare ``ab`` (``prepare``: the dataset generated, every arm built; its problems raised before any training),
    then run every unfinished run, recording each in its run folder and in results.csv as it ends, then write the
    report. Holds the lock on ``ab.out`` throughout; SIGINT/SIGTERM stop the runs (finished ones are kept).

    The steps, in order: ``plan_session`` (the runs and their records), ``resume`` (what is left, redos staged),
    ``check`` (nothing the runner did not create is in the way), ``execute`` (the first writes, the starts, then the
    runs in rounds) and ``report``.

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
        rounds: ``rounds(session)``: runs ``session.todo`` through ``session.schedule`` (default ``ablation_rounds``:
            all of them, or the seed rule's rounds); ``attn_yolo.search`` passes its own.
        report: ``report(session, wall_s) -> (text, where)`` writing the report: what the terminal shows and the line
            saying where the results are (default ``ablation_report``).
        lines: ``lines(ab, n_todo) -> list[str]``, the plan's printout (default ``describe``).
        budget: ``(deadline, max runs)`` of rounds of their own (a search's budget; the deadline on
            ``time.perf_counter``): the time left printed never runs past them.

    Returns:
        Exit code: 0 all runs ok, 1 some run failed, 2 a start that detects nothing (before any arm), 130 interrupted
        (SIGINT, Ctrl-C), 143 terminated (SIGTERM).

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
            s = plan_session(ab, runner, fired)
            s.budget = budget
            resume(s, redo, lines or describe)
            check(s)
            code = execute(s, rounds or ablation_rounds)
            if code == 2:  # the start cannot carry a comparison (start.too_weak): its one line said it all
                return code
            if code not in (130, 143):  # after the runs, one process at a time: latency timed apart from training
                latency.measure(ab, s.current())
            return finish(s, code, *(report or ablation_report)(s, time.perf_counter() - t_start))
    except KeyboardInterrupt as e:  # before or after the runs (during them, execute reports and returns)
        print(f"\nattn-yolo ablate: interrupted ({e}); run the same command again to continue", file=sys.stderr)
        return exit_code(fired)


def plan_session(ab: Ablation, runner, fired: list) -> Session:
    """Step 1, plan: every run of the plan (``plan``) and the records in ``out/runs`` (warning about unreadable
    ones, a stale results.csv and records of runs not in this config)."""
    s = Session(ab, runner, fired)
    s.planned = {(sp.variant, sp.seed): sp for sp in plan(ab, ab.data)}
    records, problems = collect_records(ab.out)
    for msg in problems:
        _warn(msg)
    s.rows = {(r["variant"], r["seed"]): r for r in records}
    if msg := check_index(s.csv_path, s.ordered_rows()):
        _warn(msg)
    if extra := [k for k in s.rows if k not in s.planned]:
        print(f"attn-yolo ablate: {len(extra)} run record(s) in {ab.out / 'runs'} are not in this config (kept, not "
              "summarised)")
    return s


def resume(s: Session, redo: bool, lines=None) -> None:
    """Step 2, resume: the runs left to do (``s.todo``): those without a finished record, and those whose settings
    changed (refused without ``redo``; with it each is trained in a staging folder, ``s.staged``). Prints the plan
    (``lines(ab, n_todo)``, default ``describe``)."""
    ab, rows = s.ab, s.rows
    changed = [k for k, sp in s.planned.items() if k in rows and rows[k]["fingerprint"] != sp.fingerprint]
    finished = [k for k in changed if rows[k]["status"] == "ok"]
    previous = rerun.previous_config(ab.out)
    rerun.check_changed(ab.out, finished, previous, outdir.portable(ab.config), UNFINGERPRINTED_TRAIN_KEYS, redo)
    rerun.check_seed_design(ab.out, previous, ab.config, sum(r["status"] == "ok" for r in rows.values()))
    if finished:
        print(f"attn-yolo ablate: redo=True: {len(finished)} finished run(s) used other settings; each is replaced "
              f"once its new run has finished (trained in {ab.out / rerun.STAGING})")
    s.todo = [rerun.stage(sp, ab.out) if k in finished else sp for k, sp in s.planned.items()
              if rows.get(k, {}).get("status") != "ok" or k in changed]
    s.staged = {(sp.variant, sp.seed): sp.run_dir for sp in s.todo if (sp.variant, sp.seed) in finished}
    for line in (lines or describe)(ab, len(s.todo)):
        print(line)
    s.done_before = len(s.planned) - len(s.todo)
    if s.done_before:
        print(f"attn-yolo ablate: {s.done_before}/{len(s.planned)} run(s) already finished in {ab.out / 'runs'}; "
              "skipping them")


def check(s: Session) -> None:
    """Step 3, check, before any work: never replace what the runner did not create (the run folders to train
    into, the starts', the dataset copy's).

    Raises:
        UsageError: naming the folder in the way.
    """
    for sp in s.todo:
        check_replaceable(Path(sp.run_dir), RUN_MARKER)
    for st in pending(s.ab):
        check_replaceable(Path(st.folder), RUN_MARKER)
    if (dest := data_copy(s.ab)[1]) is not None:
        check_replaceable(dest, DATA_MARKER)


def execute(s: Session, rounds) -> int:
    """Step 4, execute: the first writes (the claim on ``out``, config.yaml, the dataset copy), the starts, then
    ``rounds(s)``. Returns 0, 1 (a start failed), 2 (a start too weak to carry a comparison: ``start.too_weak``,
    before any arm) or the signal's exit code (the runs so far are kept)."""
    ab = s.ab
    claim_out(ab.out)  # every check passed: the first writes
    atomic_write(ab.out / "config.yaml",
                 lambda p: Path(p).write_text(yaml.safe_dump(outdir.portable(ab.config), sort_keys=False)))
    data = prepare_data(ab)
    s.uri = tracking.tracking_uri(ab.out, ab.name) if tracking.mlflow_enabled() else None
    s.todo = [dataclasses.replace(sp, data=data, env=tracking.run_env(ab.name, f"{sp.variant}-seed{sp.seed}", s.uri,
                                                                     ab.out) if s.uri else {}) for sp in s.todo]
    write_results(s.csv_path, s.ordered_rows())
    s.progress = console.Progress(len(s.todo), s.verbose)
    s.open_ended = rounds is not ablation_rounds  # a search's own rounds: the plan's runs are a most
    code = 0
    try:
        for line in s.plan_time(data, [start_spec(ab, st, data) for st in pending(ab)]):
            s.progress.line(line)
        if not train_starts(s, data):
            code = 1
        elif why := too_weak(ab):  # before any arm: nothing could be compared
            s.progress.close()
            print(f"error: attn-yolo ablate: {why}", file=sys.stderr, flush=True)
            code = 2
        else:
            rounds(s)
    except KeyboardInterrupt:
        s.progress.close()
        code = exit_code(s.fired)
        print(f"\nattn-yolo ablate: {'terminated' if code == 143 else 'interrupted'}; {len(s.durations)} run(s) of "
              f"this session recorded in {ab.out / 'runs'}. {console.interrupted_words(s.begun, s.ended, s.planned)}"
              "Run the same command again to continue.", file=sys.stderr, flush=True)
    s.progress.close()
    write_results(s.csv_path, s.ordered_rows())
    return code


def ablation_rounds(s: Session) -> None:
    """The ablation's runs: every one (a fixed list of seeds), or the seed rule's rounds (``run_rounds``)."""
    if s.ab.seed_rule is None:
        s.schedule(s.todo)
    else:
        run_rounds(s.ab, s.todo, s.rows, s.planned, s.schedule, s.n_workers, s.progress.line)


def ablation_report(s: Session, wall_s: float) -> tuple[str, str]:
    """Step 5, report: summary.md and the plots from the current records; returns what the terminal shows (the
    summary's lead) and where the results are."""
    text, head = write_report(s.ab, s.current(), wall_s)
    plots = ", ".join(p for p in ("ablation.png", "curves.png", "delta.png") if is_own_plot(s.ab.out / p))
    return "\n" + (text if s.verbose else head), (
        f"attn-yolo ablate: results in {s.ab.out} (results.csv, summary.md{', ' + plots if plots else ''}; each run's "
        f"full Ultralytics output: runs/<run>/{console.LOG_NAME})")


def finish(s: Session, code: int, text: str, where: str) -> int:
    """Print the report's ``text``, log the summary to MLflow where tracking is on, print ``where``; the exit code:
    ``code``, or 1 when a current run failed."""
    ab = s.ab
    print(text)
    if s.uri:
        try:
            run_id = tracking.log_summary(ab.name, s.uri, ab.out, [ab.out / "summary.md", s.csv_path])
            print(f"attn-yolo ablate: MLflow experiment {tracking.experiment_name(ab.name)!r} at {s.uri}: runs "
                  f"<variant>-seed<k> tagged {tracking.OUT_TAG}={ab.out}, summary.md and results.csv in run {run_id}")
        except Exception as e:  # tracking never fails an ablation
            _warn(f"MLflow: could not log the summary: {e}")
    print(where)
    if code == 0 and any(r["status"] != "ok" for r in s.current()):
        code = 1
    return code


def train_starts(s: Session, data: str) -> bool:
    """Train the recipe starts that have no usable record yet (``attn_yolo.ablate.runs.start``) before any arm, through
    the same scheduler as the arms, each measuring the cost of a run (``Session.start_line``); False when one failed
    (no arm can start from it)."""
    ok, ab, progress = True, s.ab, s.progress
    for st in pending(ab):
        spec = start_spec(ab, st, data)  # tracked beside the arms (its MLflow env), never in the working directory
        spec = dataclasses.replace(spec, env=tracking.run_env(ab.name, spec.variant, s.uri, ab.out) if s.uri else {})

        def begin(spec: RunSpec, device, st=st) -> None:
            claim(Path(spec.run_dir), RUN_MARKER, {"variant": spec.variant, "seed": spec.seed, "start": True})
            if s.timetable is not None:
                s.timetable.started(spec.run_dir, None)  # its own cost: not an arm's runs
            progress.enter("start", f"training the {'shared ' * (not st.arm)}start once ({spec.variant})")

        def end(row: dict, spec=spec, st=st) -> None:
            nonlocal ok
            row = complete({**row, "run_dir": spec.run_dir})
            write_record(row)
            wall = s.timetable.ended(spec.run_dir) if s.timetable is not None else None
            if row["status"] == "ok":
                progress.line(f"[{row['variant']}] trained once: mAP50-95 {row['map50_95']:.4f}; reused by every arm "
                              f"and rerun while its settings (fingerprint {st.fingerprint}) stay the same")
                if wall is not None and (line := s.start_line(spec, wall)):
                    progress.line(line)
            else:
                ok = False
                print(f"[{row['variant']}] FAILED: {row['error']} (see {spec.run_dir}/error.txt); no arm can start "
                      "from it", file=sys.stderr, flush=True)

        with progress.epochs(Path(spec.run_dir), int(spec.train.get("epochs", 1))):
            s.schedule([spec], begin, end)
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
    stopping rule (``comparisons.decision``) whether to go on. The first round brings the paired seeds up to the rule's
    ``min``; later rounds add as many seeds as the workers hold at once (one, in this process), for the arms still
    undecided (and the baseline): an arm whose comparison stopped runs no more seeds. Seeds already
    finished (a rerun) count without running again; a seed with a failed run is not paired and the next one is
    tried. ``say`` prints a line (above the progress bar). Returns the last decision."""
    from attn_yolo.ablate.reports.report import analyze

    arms = [v.name for v in ab.variants]
    left = {s: [sp for sp in todo if sp.seed == s] for s in ab.seeds}
    per_round = max(1, -(-n_workers // len(arms)))
    resampled: dict = {}  # each run's bootstrap, computed once over all rounds
    while True:
        current = [rows[k] for k, sp in planned.items() if k in rows and rows[k]["fingerprint"] == sp.fingerprint]
        dec = comparisons.decision(ab, current, analyze(ab, current, cache=resampled))
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
    raw, named = apply_overrides(raw, overrides), ()
    if config is None:  # the embedded default: named after what it runs (coco128-cbam), not its own name
        name, named = rerun.ran_name(raw), ("data", "variants")
    raw = rerun.default_out(raw, overrides, name, named)
    verbose = bool((raw.get("train") or {}).get("verbose")) if isinstance(raw.get("train"), dict) else False
    with console.quiet_ultralytics(verbose):
        try:
            ab = validate(raw, base, name, source)
        except ConfigError as e:  # say which problems came from the command line, not from the file
            raise ConfigError(source, from_command_line(e.problems, overrides)) from None
    return run_ablation(ab, runner=runner, started=started, **flags)
