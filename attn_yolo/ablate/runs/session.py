"""One locked run of an ablation's plan: its runs, their records, what is left, and the recording scheduler.

The scheduler records each run as it ends (``Session.schedule``), with the progress lines.

``attn_yolo.ablate.runs.runner`` makes a session and takes it through its steps (plan, resume, check, execute, report);
``attn_yolo.search`` runs its rounds through the same ``schedule``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from attn_yolo.ablate.config.ablation import Ablation, first_line
from attn_yolo.ablate.reports.summary import duration
from attn_yolo.ablate.runs import console, eta, rerun
from attn_yolo.ablate.runs.outdir import RUN_MARKER, claim
from attn_yolo.ablate.runs.records import RunSpec, complete, write_record
from attn_yolo.ablate.runs.results import write_results
from attn_yolo.ablate.runs.scheduling import schedule_local, schedule_ray
from attn_yolo.ablate.runs.start import write_inits
from attn_yolo.ablate.runs.train import CHECK_PASSES
from attn_yolo.ablate.statistics import comparisons


@dataclasses.dataclass
class Session:
    """The state of one locked run: ``planned`` runs by (arm, seed), the ``rows`` (records) by (arm, seed), the runs
    ``todo`` and the ``staged`` redos (their staging folders), ``fired`` signals."""

    ab: Ablation
    runner: object  # runner(spec, device) -> row
    fired: list
    planned: dict = dataclasses.field(default_factory=dict)  # (arm, seed) -> RunSpec
    rows: dict = dataclasses.field(default_factory=dict)  # (arm, seed) -> record
    todo: list = dataclasses.field(default_factory=list)  # RunSpecs still to run (a seed rule picks from them)
    staged: dict = dataclasses.field(default_factory=dict)  # (arm, seed) of a redo -> its staging run folder
    done_before: int = 0  # runs finished before this session
    uri: str | None = None  # MLflow tracking URI, None: no tracking
    durations: list = dataclasses.field(default_factory=list)  # seconds of each run this session
    begun: dict = dataclasses.field(default_factory=dict)  # (arm, seed) -> perf_counter at its start
    ended: set = dataclasses.field(default_factory=set)  # (arm, seed) of the runs ended this session
    progress: object = None  # console.Progress
    timetable: object = None  # eta.Timetable: the runs' seconds and the time left (``plan_time``)
    batch: list = dataclasses.field(default_factory=list)  # the round being scheduled
    rounds: int = 0  # rounds of arm runs scheduled this session
    in_batch: int = 0  # runs begun of the round being scheduled
    clock: object = time.perf_counter
    open_ended: bool = False  # rounds of their own (a search): the runs planned are the most it may run
    budget: tuple = (None, None)  # a search's (deadline on ``clock``, max runs): the time left stays within them

    @property
    def csv_path(self) -> Path:
        return self.ab.out / "results.csv"

    @property
    def verbose(self) -> bool:
        return bool(self.ab.train.get("verbose"))

    @property
    def n_workers(self) -> int:
        return max(1, len(self.ab.devices))

    def ordered_rows(self) -> list[dict]:
        """Every record: the planned runs' in plan order, then those of runs not in this config."""
        rows = self.rows
        return [rows[k] for k in self.planned if k in rows] + [rows[k] for k in rows if k not in self.planned]

    def current(self) -> list[dict]:
        """The records of planned runs made with today's settings (same fingerprint)."""
        return [self.rows[k] for k, s in self.planned.items()
                if k in self.rows and self.rows[k]["fingerprint"] == s.fingerprint]

    def schedule(self, batch: list[RunSpec], start=None, done=None) -> None:
        """Run ``batch`` on the ablation's backend, each run recorded as it ends (``on_start``, ``on_done``); after the
        first round of a seed rule, the time left measured by it (``time_left``)."""
        arms = start is None
        start, done = start or self.on_start, done or self.on_done
        logged = console.LoggedRunner(self.runner, self.verbose)
        if arms:
            self.batch, self.in_batch = list(batch), 0
            write_inits(self.ab, [sp.seed for sp in batch])  # `start: init`: the seeds' shared initialisations
        if self.ab.backend == "ray":
            schedule_ray(batch, self.ab.ray_address, self.ab.resources, logged, start, done)
        else:
            schedule_local(batch, self.ab.devices, logged, start, done)
        if arms:
            self.rounds += 1
            if self.rounds == 1 and self.ab.seed_rule is not None and self.ab.backend != "ray" and not self.open_ended:
                self.progress.line(self.round_line())

    def on_start(self, spec: RunSpec, device) -> None:
        """Claim the run's folder, forget its old record (a staged redo keeps it until it has finished), say it."""
        key = (spec.variant, spec.seed)
        claim(Path(spec.run_dir), RUN_MARKER, {"variant": spec.variant, "seed": spec.seed})
        if key not in self.staged:
            self.rows.pop(key, None)  # its old record went with the folder
        k = self.done_before + len(self.begun) + 1
        self.begun[key] = self.clock()
        if self.timetable is not None:  # the first run of each worker of a round starts with its worker process
            self.timetable.started(key, spec.variant, self.in_batch < self.n_workers)
        self.in_batch += 1
        if self.ab.backend == "ray":
            self.progress.running(f"{len(self.begun)} run(s) submitted to Ray")
            return
        dev = f" device={device}" if device is not None else ""
        self.progress.running(f"[run {k}/{len(self.planned)}] variant={spec.variant} seed={spec.seed}{dev}",
                              self.eta())

    def plan_time(self, data: str, starts: list[RunSpec]) -> list[str]:
        """Before any training: the ``Timetable`` from one timed step of the first run (``eta.prior``), and the plan's
        lines: the runs, the expected wall time and the resolution the design will reach."""
        ab = self.ab
        local = ab.backend != "ray"
        tt = self.timetable = eta.Timetable(self.n_workers if local else 1, self.clock, local and len(ab.devices) > 1)
        first = self.todo[0] if self.todo else None
        if first is None:
            return []
        try:
            with console.quiet_ultralytics(self.verbose):
                tt.cost, n_train, n_val = eta.prior(dataclasses.replace(first, data=data), ab.nc,
                                                    ab.devices[0] if ab.devices else None)
        except Exception as e:  # noqa: BLE001  an estimate must never stop the ablation
            return [f"attn-yolo ablate: plan: time unknown until a run ends ({first_line(e, 120)})"]
        tt.images = (n_train, n_val)
        for sp in [*self.todo, *starts]:
            tt.work[sp.variant] = eta.work(sp.train, n_train, n_val, CHECK_PASSES if sp.new_blocks else 0)
        tt.after_s = latency_s(ab, tt.cost.val_image_s)
        start_s = sum(tt.cost.seconds(tt.work[sp.variant]) for sp in starts)
        lo, hi = self.time_left() or (None, None)
        if lo is None:
            return []
        n = ab.seed_rule.max if ab.seed_rule else len(ab.seeds)
        runs = (f"{'up to ' * self.open_ended}{len(self.todo)} run(s)" if ab.seed_rule is None else
                f"up to {len(self.todo)} runs ({ab.seed_rule.min} to {n} paired seeds)")
        begin = f"the start (~{duration(start_s)}), then " if starts else ""
        total = span(start_s + lo, start_s + hi)
        own = self.time_left(deadline=False)
        if own is not None and own[1] > hi + 1:  # the budget's minutes end the runs before they end
            total += f" (the budget's deadline; the {len(self.todo)} runs alone ~{duration(start_s + own[1])})"
        return [f"attn-yolo ablate: plan: {begin}{runs} on {tt.workers} worker(s): expected {total} "
                f"({tt.cost.basis}; {n_train} train / {n_val} val images); the interval that decides "
                f"will be ±{eta.resolution_factor(ab, n):.2f} × the seed SD of Δ mAP50-95 at {n} paired seeds "
                "(that SD is measured by the first round)"]

    def start_line(self, spec: RunSpec, wall_s: float) -> str:
        """After a start trained here: the cost it measured (``eta.calibrate``) and the runs' time from it."""
        from attn_yolo.ablate.runs.records import epoch_table

        tt = self.timetable
        if tt is None or tt.cost is None or spec.variant not in tt.work:
            return ""
        ends = epoch_table(Path(spec.run_dir) / "results.csv").get("time", [])
        tt.cost = eta.calibrate(tt.cost, tt.work[spec.variant], spec.train, tt.images[1], wall_s, ends)
        lo, hi = self.time_left() or (None, None)
        return "" if lo is None else (f"attn-yolo ablate: [start] took {duration(wall_s)} ({tt.cost.basis}): the runs "
                                      f"{span(lo, hi)}")

    def round_line(self) -> str:
        """After the first round: the time left from its measured runs and seeds, and the resolution it implies."""
        lo, hi = self.time_left() or (None, None)
        if lo is None:
            return ""
        rows, ab = self.current(), self.ab
        sds = [float(np.std(d, ddof=1)) for a in comparisons.arms(ab)
               if len(d := comparisons.paired_diffs(ab, rows, a)) > 1]
        n = ab.seed_rule.max
        res = (f"; at the measured seed SD of Δ ({max(sds):.4f}) the interval that decides will be "
               f"±{eta.resolution_factor(ab, n) * max(sds):.4f} at {n} paired seeds" if sds else "")
        tt = self.timetable
        spawn = f", a worker's start {duration(tt.spawn_s())}" if tt.spawn_s() else ""
        per = ", ".join(f"{a} {duration(tt.run_s(a))}" for a in tt.measured) + spawn
        return (f"attn-yolo ablate: [runs] after the first round: {span(lo, hi)} left (runs measured: {per}; the "
                f"seeds the rule still needs simulated from the measured Δ){res}")

    def time_left(self, deadline: bool = True) -> tuple[float, float] | None:
        """(expected, or fewest, most) seconds left: the runs of the round under way, then the seed rule's rounds
        (``eta.future_rounds``; before two paired seeds, ``eta.rounds_range``); None when unknown. ``deadline``: at
        most the time to the budget's deadline (False: the runs' own time)."""
        tt, ab = self.timetable, self.ab
        if tt is None:
            return None
        if ab.seed_rule is None:
            left = [sp.variant for sp in self.todo if (sp.variant, sp.seed) not in self.begun]
            t = tt.left_s(self.within_budget(left))
            t = self.before_deadline(t) if t is not None and deadline else t
            return None if t is None else (t, t)
        queue = [sp.variant for sp in self.batch if (sp.variant, sp.seed) not in self.begun]
        rows = self.current()
        dec = comparisons.decision(ab, rows)
        going = [] if dec["stop"] and rows else [a for a, d in dec["variants"].items() if not d["stop"]]
        paired = len({r["seed"] for r in rows} | {sp.seed for sp in self.batch})
        per_round = max(1, -(-self.n_workers // len(ab.variants)))
        sims = eta.future_rounds(ab, {a: comparisons.paired_diffs(ab, rows, a) for a in going}, paired, per_round)
        if sims is not None:
            t = tt.left_s(queue, sims)
            return None if t is None else (t, t)
        lo, hi = (tt.left_s(queue, [r]) for r in eta.rounds_range(ab, paired, per_round, going))
        return None if lo is None or hi is None else (lo, hi)

    def within_budget(self, queue: list[str]) -> list[str]:
        """The runs of ``queue`` that the budget's ``max runs`` leaves room for (all of them without one)."""
        most = self.budget[1]
        if most is None:
            return queue
        running = sum(k not in self.ended for k in self.begun)
        return queue[: max(0, most - len(self.current()) - running)]

    def before_deadline(self, seconds: float) -> float:
        """``seconds``, at most the time to the budget's deadline (a round begun before it still ends after it)."""
        deadline = self.budget[0]
        return seconds if deadline is None else min(seconds, max(0.0, deadline - self.clock()))

    def eta(self) -> str:
        """The time left, for the progress line (``time_left``)."""
        left = self.time_left()
        if left is None:
            return "unknown until a run ends"
        setup = "" if self.timetable.measured or self.timetable.cost.setup_s else " (set-up per run not yet measured)"
        return span(*left) + setup

    def on_done(self, row: dict) -> None:
        """Record an ended run in its folder (a redo: its folder now replaces the old one) and in results.csv."""
        key = (row["variant"], row["seed"])
        self.ended.add(key)
        wall = self.timetable.ended(key) if self.timetable is not None else None
        self.durations.append(self.clock() - self.begun.get(key, self.clock()) if wall is None else wall)
        if key in self.staged:
            row = rerun.promote(complete(row), self.staged[key], self.planned[key].run_dir)
        else:
            row = complete({**row, "run_dir": self.planned[key].run_dir})  # the record lives in the run folder
            write_record(row)
        self.rows[key] = row
        write_results(self.csv_path, self.ordered_rows())
        msg = f"mAP50-95 {row['map50_95']:.4f}" if row["status"] == "ok" else f"FAILED: {row['error']}"
        host = f" on {row.get('host')}" if self.ab.backend == "ray" else ""
        log = Path(self.planned[key].run_dir) / console.LOG_NAME
        self.progress.done(f"[done {len(self.durations)}/{len(self.todo)}] variant={row['variant']} "
                           f"seed={row['seed']}{host}: {msg} ({duration(self.durations[-1])}; log {log})")


def span(lo: float, hi: float) -> str:
    """``~3m10s``, or ``~2m05s to ~4m40s`` for a range."""
    return f"~{duration(lo)}" if duration(lo) == duration(hi) else f"~{duration(lo)} to ~{duration(hi)}"


def latency_s(ab: Ablation, val_image_s: float) -> float:
    """Seconds of the latency timing after the runs (``latency.measure``): every arm's warm-up and timed forwards at
    batch 1, one image each at the validation's per-image cost."""
    from attn_yolo.ablate.runs.latency import ROUND_FORWARDS

    lat = ab.latency or {}
    rounds = max(3, int(lat.get("repeats", 50)) // ROUND_FORWARDS)
    return len(ab.variants) * (int(lat.get("warmup", 10)) + rounds * ROUND_FORWARDS) * val_image_s
