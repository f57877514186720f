"""The ablation's expected wall time (attn_yolo.ablate.runs.eta), against simulated ablations on a fake clock.

The simulated machine runs every run in a time of its own making: a set-up per run, each worker process's start (once
per worker and round), training steps 2.5 × slower than the one timed step (data loading, the optimizer), validation
passes (the arm with blocks validates 4 more times: the attention check), and ±8 % noise. Runs go to two workers in
plan order as ``scheduling.schedule_local`` does, and the real rounds of the seed rule (``runner.ablation_rounds``)
decide on their mAP50-95. The truth is the fake clock when the last run ends.
"""

import copy
import heapq
import io
import math

import numpy as np
import pytest
from conftest import write_config

from attn_yolo.ablate.config.ablation import load_config
from attn_yolo.ablate.config.validate import validate
from attn_yolo.ablate.reports.summary import duration
from attn_yolo.ablate.runs import console, eta, runner, session
from attn_yolo.ablate.runs.records import new_record

N_TRAIN, N_VAL = 1000, 200  # the embedded default's synthetic dataset
PRIOR = eta.Cost(0.0, 0.1, 0.005 / 2, "one timed step, the set-up per run not yet measured")  # what time_steps gives
TRUE = eta.Cost(12.0, 0.25, 0.02, "the machine")  # what runs really cost
SPAWN_S = 4.0  # a worker process's start (imports) before its first run of each round


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


class World:
    """The simulated machine and data: run times from ``TRUE``, mAP50-95 with a true Δ per arm and seed noise."""

    def __init__(self, clock, effects: dict, sd: float, seed: int, start_train: dict | None = None):
        self.clock, self.effects, self.sd, self.rng = clock, effects, sd, np.random.default_rng(seed)
        self.seed = seed
        self.start_train = start_train

    def seconds(self, spec) -> tuple[float, float]:
        """A run's seconds on the machine, and its noise factor (the machine's speed during the run)."""
        w = eta.work(spec.train, N_TRAIN, N_VAL, 4 if spec.new_blocks else 0)
        f = float(self.rng.lognormal(0.0, 0.08))
        return TRUE.seconds(w) * f, f

    def row(self, spec, device) -> dict:
        noise = np.random.default_rng([self.seed, spec.seed, len(spec.variant)]).normal(0, self.sd / math.sqrt(2))
        m = 0.5 + self.effects.get(spec.variant, 0.0) + noise + 0.002 * spec.seed
        return {**new_record(spec, device), "status": "ok", "precision": 0.5, "recall": 0.5, "map50": 0.7,
                "map50_95": float(m), "epochs": 1, "best_epoch": 1, "train_time_s": 1.0}

    def schedule_local(self, specs, devices, run, on_start, on_done) -> None:
        """``scheduling.schedule_local`` on the fake clock: each run to the first free worker, in plan order."""
        idle, fresh, busy, todo, k = list(range(len(devices))), set(range(len(devices))), [], list(specs), 0
        while todo or busy:
            while todo and idle:
                w, spec = idle.pop(0), todo.pop(0)
                on_start(spec, devices[w])
                t, f = self.seconds(spec)
                t += SPAWN_S * (w in fresh)
                fresh.discard(w)
                if spec.variant == "start":  # its epochs' seconds in results.csv, as Ultralytics writes them
                    self.write_results(spec, f)
                heapq.heappush(busy, (self.clock.t + t, k, w, spec))
                k += 1
            self.clock.t, _, w, spec = heapq.heappop(busy)
            idle.append(w)
            on_done(self.row(spec, devices[w]))

    def write_results(self, spec, f: float) -> None:
        from pathlib import Path

        epochs = spec.train["epochs"]
        each = eta.work(spec.train, N_TRAIN, N_VAL).steps / epochs * TRUE.step_s * f
        ends = [each * (k + 1) + (k == epochs - 1) * N_VAL * TRUE.val_image_s * f for k in range(epochs)]
        Path(spec.run_dir).mkdir(parents=True, exist_ok=True)  # val: false: the last epoch validates
        (Path(spec.run_dir) / "results.csv").write_text("epoch,time\n" + "".join(
            f"{k + 1},{t:.3f}\n" for k, t in enumerate(ends)))


def simulate(tmp_path, tiny_data, monkeypatch, variants, effects, seeds, world_seed, sd=0.004, start=True):
    """One simulated ablation on the fake clock: returns (its Session, its lines, [(clock, time left)] at the plan,
    after the start and after the first round, the clock at the end)."""
    over = {"seeds": seeds, "devices": ["cpu", "cpu"], "variants": variants,
            "train": {"epochs": 1, "fraction": 0.5, "imgsz": 64, "batch": 8, "val": True, "plots": False}}
    if start:
        over["start"] = {"epochs": 5, "fraction": 1.0, "val": False}
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = write_config(tmp_path, tiny_data, **over)
    raw, base, name, source = load_config(cfg)
    ab = validate(raw, base, name, source)
    clock = Clock()
    world = World(clock, effects, sd, world_seed)
    monkeypatch.setattr(session, "schedule_local", world.schedule_local)
    monkeypatch.setattr(eta, "prior", lambda spec, nc, device=None: (PRIOR, N_TRAIN, N_VAL))
    s = session.Session(ab, runner=None, fired=[], clock=clock)
    s.planned = {(sp.variant, sp.seed): sp for sp in runner.plan(ab, ab.data)}
    s.todo = list(s.planned.values())
    out = io.StringIO()
    s.progress = console.Progress(len(s.todo), file=out)
    seen = []
    starts = [runner.start_spec(ab, st, ab.data) for st in runner.pending(ab)]
    lines = s.plan_time(ab.data, starts)
    s.timetable.after_s = 0.0  # the latency timing: not simulated
    seen.append((clock.t, s.time_left()))
    assert runner.train_starts(s, ab.data)
    seen.append((clock.t, s.time_left()))
    first = s.round_line

    def round_line():  # the old model beside: mean run × runs left ÷ workers
        old = np.mean(s.durations) * (len(s.todo) - len(s.durations)) / s.n_workers
        seen.append((clock.t, s.time_left(), old, copy.deepcopy(s.timetable)))  # its state then (clock frozen)
        return first()

    monkeypatch.setattr(s, "round_line", round_line)
    runner.ablation_rounds(s)
    return s, lines + out.getvalue().splitlines(), seen, clock.t


MAIN = [{"name": "baseline", "model": "yolo11n.yaml"},
        {"name": "cbam", "base": "yolo11n.yaml", "module": "CBAM", "at": "backbone", "args": [16, 7]}]


def errors(tmp_path, tiny_data, monkeypatch, variants, effects, seeds, worlds, start=True):
    """Per simulated world: the relative error of the time left after the first round, the runs' true time after the
    start and the (fewest, most) estimate then, the session, its lines, the old model's relative error, and the
    relative error of the time model alone: the time left then, given the rounds that really followed."""
    out = []
    for w in worlds:
        s, lines, seen, end = simulate(tmp_path / str(w), tiny_data, monkeypatch, variants, effects, seeds, w,
                                       start=start)
        (t1, after_start), (t2, after_round, old, then) = seen[-2:]
        assert after_round[0] == after_round[1]  # measured Δ: one expected figure, no range
        truth = end - t2
        first = s.ab.seed_rule.min
        ran = [[v.name for v in s.ab.variants if (v.name, k) in s.rows] for k in s.ab.seeds[first:]]
        given = then.left_s([], [[r for r in ran if r]])
        out.append(((after_round[0] - truth) / truth, end - t1, after_start, s, lines, (old - truth) / truth,
                    (given - truth) / truth))
    return out


def test_main_job_eta_within_30_percent_after_the_first_round(tmp_path, tiny_data, monkeypatch):
    """The main job (a shared start, then baseline and CBAM × 3..6 paired seeds on 2 workers, no true Δ), 8 simulated
    worlds. After the first round the time model (runs measured per arm, rounds on 2 workers started afresh, the
    workers' starts) is within ±15 % of the truth given the rounds that followed, in every world; with the rounds
    still to be drawn (the rule's stop is random) the time left is within ±30 % in 6 of 8 worlds, median error under
    10 %: the two misses are worlds whose first seeds pointed one way and the rule stopped earlier or later than
    expected. After the start, the (first look, last look) estimate brackets the runs' truth within 30 %; the old
    estimate (one timed step × 12 runs ÷ 2 workers, ~50 s) missed it by 6×."""
    got = errors(tmp_path, tiny_data, monkeypatch, MAIN, {}, {"min": 3, "max": 6}, range(8))
    rel, model = np.array([g[0] for g in got]), np.array([g[-1] for g in got])
    print("main job, time left after the first round, relative error per world:", np.round(rel, 3),
          "given the rounds that followed:", np.round(model, 3), "old model:", np.round([g[-2] for g in got], 3))
    assert (np.abs(model) <= 0.15).all(), model  # the time model: runs, rounds, workers, the workers' starts
    assert (np.abs(rel) <= 0.3).sum() >= 6 and np.median(np.abs(rel)) <= 0.1, rel  # with the seeds still random
    for _, truth, (lo, hi), s, lines, *_ in got:
        assert lo * 0.7 <= truth <= hi * 1.3, (lo, hi, truth)
        old = eta.work(s.todo[0].train, N_TRAIN, N_VAL)  # the old model: compute of one run × 12 runs ÷ 2 workers
        assert (old.steps * PRIOR.step_s + old.val_images * PRIOR.val_image_s) * 12 / 2 < 0.3 * truth
    lines = got[0][4]
    assert any("plan: the start" in line and "paired seeds" in line for line in lines)
    assert any("[start] took" in line and "set-up per run" in line for line in lines)
    assert any("after the first round" in line and "left" in line for line in lines)


def test_twenty_run_ablation_eta_within_30_percent_after_the_first_round(tmp_path, tiny_data, monkeypatch):
    """4 arms × 3..5 paired seeds (20 runs at most) on 2 workers, from scratch, two arms with a clear effect (they
    settle early and run no more seeds), one without: the time left after the first round within ±30 % of the truth,
    where the old model (mean run × runs left ÷ workers) counts the seeds that never run and misses by more."""
    arms = [*MAIN, {"name": "se", "base": "yolo11n.yaml", "module": "SE", "at": "backbone", "args": [16]},
            {"name": "eca", "base": "yolo11n.yaml", "module": "ECA", "at": "backbone", "args": [3]}]
    got = errors(tmp_path, tiny_data, monkeypatch, arms, {"cbam": 0.05, "se": 0.05}, {"min": 3, "max": 5}, range(4),
                 start=False)
    rel, old = np.array([g[0] for g in got]), np.array([g[-2] for g in got])
    print("20-run ablation, relative error per world:", np.round(rel, 3), "old model:", np.round(old, 3))
    assert (np.abs(rel) <= 0.3).all() and np.mean(np.abs(old)) > 0.3, (rel, old)
    for g in got:
        m = g[3].timetable.measured
        assert len(m["cbam"]) < 5 and len(m["se"]) < 5 and len(m["eca"]) == 5  # the settled arms stopped early


def test_makespan_is_list_scheduling_in_plan_order():
    assert eta.makespan([3, 1, 1, 1], 2) == 3  # 3 | 1+1+1
    assert eta.makespan([1, 1, 5], 2) == 6  # the third run waits for a free worker
    assert eta.makespan([2, 2], 2, busy=[4.0]) == 4
    assert eta.makespan([], 2) == 0


def test_calibrate_from_the_start_recovers_the_machine():
    """A start of known work on the simulated machine: its epochs' seconds give the real per-step speed, the rest of
    its wall time the set-up (an independent computation: TRUE's own figures)."""
    train = {"epochs": 5, "batch": 8, "fraction": 1.0, "val": False}
    w = eta.work(train, N_TRAIN, N_VAL)
    assert w.steps == 125 * 5 and w.val_images == 2 * N_VAL
    ends = [125 * TRUE.step_s * (k + 1) for k in range(5)]
    ends[-1] += N_VAL * TRUE.val_image_s  # val: false: the last epoch validates
    got = eta.calibrate(PRIOR, w, train, N_VAL, TRUE.seconds(w), ends)  # PRIOR: 2.5 × too fast, another ratio
    assert got.step_s == pytest.approx(TRUE.step_s) and got.setup_s == pytest.approx(TRUE.setup_s)
    assert got.val_image_s == pytest.approx(TRUE.val_image_s)
    flat = [125 * TRUE.step_s * (k + 1) for k in range(5)]  # the last epoch no slower: noise, not a free validation
    assert eta.calibrate(PRIOR, w, train, N_VAL, TRUE.seconds(w), flat).val_image_s == PRIOR.val_image_s


def test_arm_with_blocks_counts_the_attention_check():
    from attn_yolo.ablate.runs.train import CHECK_PASSES

    train = {"epochs": 1, "batch": 8, "fraction": 0.5, "val": True}
    assert eta.work(train, N_TRAIN, N_VAL).val_images == 2 * N_VAL  # per epoch + best.pt
    assert eta.work(train, N_TRAIN, N_VAL, CHECK_PASSES).val_images == (2 + 4) * N_VAL


def test_the_time_left_stays_within_a_search_budget(tmp_path, tiny_data, monkeypatch):
    """Rounds of their own (a search) with a budget: the time left counts only the runs ``max runs`` leaves room
    for, and never passes the deadline (the default search said ~47 min for its 72 runs where its budget was 18)."""
    cfg = write_config(tmp_path, tiny_data, seeds=list(range(6)), devices=["cpu", "cpu"], variants=MAIN,
                       train={"epochs": 1, "fraction": 0.5, "imgsz": 64, "batch": 8, "val": True, "plots": False})
    ab = validate(*load_config(cfg))
    clock = Clock()
    monkeypatch.setattr(eta, "prior", lambda spec, nc, device=None: (TRUE, N_TRAIN, N_VAL))
    s = session.Session(ab, runner=None, fired=[], clock=clock)
    s.planned = {(sp.variant, sp.seed): sp for sp in runner.plan(ab, ab.data)}
    s.todo = list(s.planned.values())
    s.plan_time(ab.data, [])
    queue = [sp.variant for sp in s.todo]
    whole = s.time_left()[0]
    assert whole == pytest.approx(s.timetable.left_s(queue)) and len(queue) == 12
    s.budget = (None, 4)
    four = s.time_left()[0]
    assert four == pytest.approx(s.timetable.left_s(queue[:4])) and four < whole
    s.budget = (clock.t + 30.0, None)
    assert s.time_left() == (30.0, 30.0) and whole > 30
    clock.t += 40.0  # past the deadline: nothing is left to start
    assert s.time_left() == (0.0, 0.0)


def test_the_plan_line_says_when_the_budget_ends_the_runs_first(tmp_path, tiny_data, monkeypatch):
    """A search whose minutes end before its runs: the plan's expected time is the deadline's, and the line says so
    with the runs' own time beside it (the key search's plan read "up to 56 runs ... expected ~17m52s", its budget,
    where the 56 runs take about 36 minutes); without a deadline, the line is the runs' own time alone."""
    cfg = write_config(tmp_path, tiny_data, seeds=list(range(6)), devices=["cpu", "cpu"], variants=MAIN,
                       train={"epochs": 1, "fraction": 0.5, "imgsz": 64, "batch": 8, "val": True, "plots": False})
    ab = validate(*load_config(cfg))
    monkeypatch.setattr(eta, "prior", lambda spec, nc, device=None: (TRUE, N_TRAIN, N_VAL))

    def plan(budget):
        s = session.Session(ab, runner=None, fired=[], clock=Clock())
        s.planned = {(sp.variant, sp.seed): sp for sp in runner.plan(ab, ab.data)}
        s.todo, s.budget = list(s.planned.values()), budget
        return s.plan_time(ab.data, [])[0], s

    free, s = plan((None, None))
    own = s.timetable.left_s([sp.variant for sp in s.todo])
    assert "deadline" not in free and f"expected ~{duration(own)} (" in free
    capped, _ = plan((30.0, None))
    assert f"expected ~{duration(30.0)} (the budget's deadline; the 12 runs alone ~{duration(own)})" in capped
