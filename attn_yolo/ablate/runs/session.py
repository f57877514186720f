"""One locked run of an ablation's plan: its runs, their records, what is left, and the recording scheduler.

The scheduler records each run as it ends (``Session.schedule``), with the progress lines.

``attn_yolo.ablate.runs.runner`` makes a session and takes it through its steps (plan, resume, check, execute, report);
``attn_yolo.search`` runs its rounds through the same ``schedule``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path

from attn_yolo.ablate.runs import console, rerun
from attn_yolo.ablate.config.ablation import Ablation, first_line
from attn_yolo.ablate.runs.outdir import RUN_MARKER, claim
from attn_yolo.ablate.runs.records import RunSpec, complete, write_record
from attn_yolo.ablate.runs.results import write_results
from attn_yolo.ablate.runs.scheduling import schedule_local, schedule_ray
from attn_yolo.ablate.reports.summary import duration
from attn_yolo.ablate.runs.train import first_run_estimate


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
    estimate: dict = dataclasses.field(default_factory=dict)  # the first run's estimate {"s", "basis"}
    progress: object = None  # console.Progress

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
        """Run ``batch`` on the ablation's backend, each run recorded as it ends (``on_start``, ``on_done``)."""
        start, done = start or self.on_start, done or self.on_done
        logged = console.LoggedRunner(self.runner, self.verbose)
        if self.ab.backend == "ray":
            schedule_ray(batch, self.ab.ray_address, self.ab.resources, logged, start, done)
        else:
            schedule_local(batch, self.ab.devices, logged, start, done)

    def on_start(self, spec: RunSpec, device) -> None:
        """Claim the run's folder, forget its old record (a staged redo keeps it until it has finished), say it."""
        key = (spec.variant, spec.seed)
        claim(Path(spec.run_dir), RUN_MARKER, {"variant": spec.variant, "seed": spec.seed})
        if key not in self.staged:
            self.rows.pop(key, None)  # its old record went with the folder
        k = self.done_before + len(self.begun) + 1
        self.begun[key] = time.perf_counter()
        if self.ab.backend == "ray":
            self.progress.running(f"{len(self.begun)} run(s) submitted to Ray")
            return
        dev = f" device={device}" if device is not None else ""
        self.progress.running(f"[run {k}/{len(self.planned)}] variant={spec.variant} seed={spec.seed}{dev}",
                              self.eta(spec, device))

    def eta(self, spec: RunSpec, device) -> str:
        """Time left for the runs to do: from the runs ended so far, or before any has, from the dataset size, the
        epochs and one timed training step (``first_run_estimate``)."""
        left = len(self.todo) - len(self.durations)
        if self.durations:
            return duration(statistics.fmean(self.durations) * left / self.n_workers)
        if not self.estimate:
            try:
                with console.quiet_ultralytics(self.verbose):
                    self.estimate["s"], self.estimate["basis"] = first_run_estimate(spec, self.ab.nc, device)
            except Exception as e:  # noqa: BLE001  an estimate must never stop the ablation
                self.estimate["s"], self.estimate["basis"] = None, first_line(e, 120)
        if self.estimate["s"] is None:
            return f"unknown until run 1 ends ({self.estimate['basis']})"
        return (f"~{duration(self.estimate['s'] * left / self.n_workers)} (estimated from {self.estimate['basis']}; "
                "measured from run 1 on)")

    def on_done(self, row: dict) -> None:
        """Record an ended run in its folder (a redo: its folder now replaces the old one) and in results.csv."""
        key = (row["variant"], row["seed"])
        self.ended.add(key)
        self.durations.append(time.perf_counter() - self.begun.get(key, time.perf_counter()))
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
