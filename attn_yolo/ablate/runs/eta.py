"""An ablation's expected wall time: each run's seconds, the rounds the scheduler runs them in, the seeds left.

An ablation's time left is not (mean run time × runs left ÷ workers). Four things set it, and each is modelled:

- **What a run does** (``Work``): its training steps (images used ÷ batch × epochs), and every validation pass over the
  val split: one per epoch (``val: false``: the last one only), best.pt's final one, and for an arm with new blocks the
  attention check's ``train.CHECK_PASSES`` more. The arm with blocks therefore takes longer than the baseline.
- **What that costs on this machine** (``Cost``): a set-up per run (the worker process's start, the trainer, the
  dataset), seconds per training step and per validated image. Before any run they come from one timed step
  (``train.time_steps``) and the set-up is unknown; the shared start, trained first by the same runner, measures them
  (``calibrate``: its epochs' times in results.csv give the real seconds per step, data loading included, and per
  validated image; the rest of its wall time is the set-up). From then on an arm's runs measure it directly
  (``Timetable.run_s``).
- **The schedule** (``makespan``): runs go to the first free worker in plan order (``scheduling.schedule_local``),
  and a round of seeds ends when its slowest run ends: a round of one seed on two workers lasts as long as its slower
  arm, not half the pair's sum.
- **The seeds** (``future_rounds``): with seeds chosen by the data the rule may stop at any look from ``seeds.min`` to
  ``seeds.max``. Once an arm has two paired seeds, its further Δ are drawn from their predictive distribution (the
  mean Δ and the seed SD, each with its uncertainty) and the rule (``sequential``'s design at the joint level) is run
  on them: the expected rounds left, and which arms each runs (an arm that stops runs no more seeds). Before that,
  the time is a range from the first look to the last.

After the runs, the latency timing (``latency.measure``: every arm's forwards at batch 1) is added.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from attn_yolo.ablate.reports.summary import duration

EXPERIMENTS = 400  # simulated continuations of the seed rule per estimate (fixed seed: the same data, the same ETA)


@dataclasses.dataclass(frozen=True)
class Work:
    """What one run does: ``steps`` training steps, ``val_images`` images validated (every pass over the val split)."""

    steps: int
    val_images: int


@dataclasses.dataclass
class Cost:
    """Seconds on this machine: ``setup_s`` per run, ``step_s`` per training step, ``val_image_s`` per validated image;
    ``basis`` says what they rest on."""

    setup_s: float
    step_s: float
    val_image_s: float
    basis: str

    def seconds(self, w: Work) -> float:
        return self.setup_s + w.steps * self.step_s + w.val_images * self.val_image_s


def work(train: dict, n_train: int, n_val: int, check_passes: int = 0) -> Work:
    """The ``Work`` of a run with Ultralytics train args ``train`` on ``n_train`` / ``n_val`` images:
    ``ceil(images used / batch) × epochs`` steps (``fraction``: a share, or a whole number of images; auto batch:
    Ultralytics' 16), and ``(epochs if val else 1) + 1 + check_passes`` passes over the val split."""
    from ultralytics.cfg import DEFAULT_CFG_DICT

    tr = {**DEFAULT_CFG_DICT, **train}
    batch = tr["batch"] if isinstance(tr["batch"], int) and tr["batch"] > 0 else 16
    frac = tr["fraction"]
    used = frac if isinstance(frac, int) and not isinstance(frac, bool) and frac > 1 else round(n_train * frac)
    steps = math.ceil(max(1, min(used, n_train)) / batch) * tr["epochs"]
    return Work(steps, ((tr["epochs"] if tr["val"] else 1) + 1 + check_passes) * n_val)


def prior(spec, nc: int, device=None) -> tuple[Cost, int, int]:
    """``(cost, n_train, n_val)`` before any run: the train and val images of ``spec``'s dataset, and the seconds of
    one training step and one validation batch of ``spec``'s model timed now (``train.time_steps``); the set-up per
    run is not known yet (0 until a run measures it)."""
    from ultralytics.data.utils import check_det_dataset

    from attn_yolo.ablate.runs.train import count_images, time_steps

    info = check_det_dataset(spec.data, autodownload=False)
    n_train, n_val = count_images(info["train"]), count_images(info.get("val") or [])
    batch = spec.train.get("batch", 16)
    batch = batch if isinstance(batch, int) and batch > 0 else 16
    step_s, val_s = time_steps(spec, nc, device)
    return Cost(0.0, step_s, val_s / (2 * batch), "one timed step, the set-up per run not yet measured"), n_train, n_val


def calibrate(prior: Cost, w: Work, train: dict, n_val: int, wall_s: float, epoch_end_s: list[float]) -> Cost:
    """The ``Cost`` measured by one run of ``Work`` ``w`` (the shared start) that took ``wall_s`` in the scheduler:
    ``epoch_end_s`` the seconds since its training began at each epoch's end (results.csv's ``time``).

    An epoch without validation is steps only: their median gives the seconds per step (data loading included). With
    ``val: false`` only the last epoch validates, and its excess over that median is one validation pass; otherwise a
    pass keeps the ``prior``'s ratio to a step (one timed step each). The set-up is what the wall time leaves after
    the epochs and best.pt's final validation."""
    ends = [t for t in epoch_end_s if math.isfinite(t)]
    epochs, val = int(train.get("epochs", 1)), bool(train.get("val", True))
    if len(ends) != epochs or not ends or ends[-1] <= 0:
        return prior
    each = np.diff([0.0, *ends])
    per_epoch = w.steps / epochs
    if not val and epochs >= 2:
        plain = float(np.median(each[:-1]))
        step_s, val_image_s = plain / per_epoch, max(0.0, each[-1] - plain) / n_val
        val_image_s = val_image_s or prior.val_image_s  # the last epoch no slower than the others: noise, not 0 s
    else:
        speed = ends[-1] / (w.steps * prior.step_s + (epochs if val else 1) * n_val * prior.val_image_s)
        step_s, val_image_s = prior.step_s * speed, prior.val_image_s * speed
    loop_val = (epochs if val else 1) * n_val
    setup = max(0.0, wall_s - ends[-1] - (w.val_images - loop_val) * val_image_s)
    return Cost(setup, step_s, val_image_s, f"measured by the start: {duration(setup)} set-up per run, "
                f"{step_s:.3g} s per step, {1000 * val_image_s:.3g} ms per validated image")


def makespan(times: list[float], workers: int, busy: list[float] = ()) -> float:
    """Seconds until ``times`` (runs in plan order) have all run on ``workers`` workers, each run to the first free
    worker (as ``scheduling.schedule_local``); ``busy``: seconds left of the runs already running."""
    free = sorted([*busy, *[0.0] * max(0, workers - len(busy))])
    for t in times:
        free[0] += t
        free.sort()
    return max(free, default=0.0)


def _stops(observed: list[float], rule, n_max: int, rng) -> np.ndarray:
    """Seed counts at which ``rule`` stops each of ``EXPERIMENTS`` continuations of ``observed`` (n ≥ 2 paired Δ, mean
    x̄, SD s): further Δ ~ N(μ, σ²) from the posterior predictive of a normal sample under the reference prior (σ² ~
    (n − 1)s² / χ²_{n−1}, μ | σ ~ N(x̄, σ²/n): three seeds say little about σ), the design's intervals after each
    seed, the first stop after the seeds observed (before them the rule already said go on)."""
    from attn_yolo.ablate.statistics.sequential import _intervals, _reason_codes

    x0 = np.asarray(observed, np.float64)
    n0, sd = len(x0), float(np.std(x0, ddof=1))
    if n0 >= n_max:
        return np.full(EXPERIMENTS, n0)
    sd = sd if sd > 0 else 1e-6
    sigma = sd * np.sqrt((n0 - 1) / rng.chisquare(n0 - 1, (EXPERIMENTS, 1)))
    mu = rng.normal(x0.mean(), sigma / math.sqrt(n0))
    x = np.concatenate([np.broadcast_to(x0, (EXPERIMENTS, n0)), rng.normal(mu, sigma, (EXPERIMENTS, n_max - n0))], 1)
    lo, hi = _intervals(x, rule.confidence, 0.0, naive=False, rule=rule)
    codes = _reason_codes(lo, hi, np.arange(1, n_max + 1)[None], rule)
    codes[:, :n0] = 0
    return np.argmax(codes > 0, axis=1) + 1


def future_rounds(ab, diffs: dict[str, list[float]], paired: int, per_round: int, seed: int = 0
                  ) -> list[list[list[str]]] | None:
    """The rounds of seeds the rule runs after ``paired`` seeds, one list per simulated continuation: each round the
    arms it runs (the baseline and the arms not stopped), ``per_round`` seeds a round (the first up to ``seeds.min``,
    as ``runner.run_rounds``). ``diffs``: each arm's paired Δ
    so far. None when an arm has fewer than 2 paired Δ (no spread yet: ``rounds_range`` instead)."""
    from attn_yolo.ablate.statistics.comparisons import joint_rule

    rule = joint_rule(ab)
    if any(len(d) < 2 for d in diffs.values()):
        return None
    rng = np.random.default_rng(seed)
    stops = {a: _stops(d, rule, rule.max, rng) for a, d in diffs.items()}
    out = []
    for e in range(EXPERIMENTS):
        rounds, n = [], paired
        while n < rule.max and any(s[e] > n for s in stops.values()):
            seeds = range(n + 1, min(rule.max, n + max(per_round, rule.min - n)) + 1)
            rounds.append([a for s in seeds for a in [ab.baseline, *(a for a, st in stops.items() if st[e] >= s)]])
            n = seeds[-1]
        out.append(rounds)
    return out


def rounds_range(ab, paired: int, per_round: int, going: list[str]) -> tuple[list, list]:
    """(fewest, most) rounds after ``paired`` seeds, before the data can say: the rule stops at its next look, or runs
    every arm in ``going`` to ``seeds.max``."""
    looks = [n for n in ab.seed_rule.planned() if n > paired]
    if not looks:
        return [], []

    def to(n):
        out, k = [], paired
        while k < n:
            seeds = range(k + 1, min(n, k + max(per_round, ab.seed_rule.min - k)) + 1)
            out.append([a for _ in seeds for a in [ab.baseline, *going]])
            k = seeds[-1]
        return out

    return to(looks[0]), to(looks[-1])


def resolution_factor(ab, n: int) -> float:
    """The half-width of the interval that decides after ``n`` paired seeds, in units of the seed SD of Δ: the seed
    rule's design (``seqpower.half_width``) or, for a fixed list, the t-interval, both at the joint level."""
    from attn_yolo.ablate.statistics import seqpower
    from attn_yolo.ablate.statistics.comparisons import joint_level, joint_rule

    if ab.seed_rule is not None:
        return seqpower.half_width(1.0, n, joint_rule(ab))
    from scipy.special import stdtrit

    return float(stdtrit(n - 1, 1 - (1 - joint_level(ab)) / 2)) / math.sqrt(n) if n >= 2 else math.inf


class Timetable:
    """The runs' measured seconds by arm and the time left (``left_s``), on ``workers`` workers, by ``clock``.

    ``spawns``: every round starts its workers afresh (``scheduling.schedule_local`` with several devices), so the
    first run on each worker of a round (*cold*) also pays the worker process's start (``spawn_s``, measured as cold
    runs' excess over warm ones of the same arm)."""

    def __init__(self, workers: int, clock=time.perf_counter, spawns: bool = False):
        self.workers, self.clock, self.spawns = max(1, workers), clock, spawns
        self.cost: Cost | None = None  # before any arm run: the prior (one timed step), then the start's
        self.work: dict[str, Work] = {}  # arm -> its runs' Work
        self.measured: dict[str, list[float]] = {}
        self.cold: dict[str, list[bool]] = {}  # arm -> whether each measured run was its worker's first of a round
        self.running: dict = {}  # key -> (arm, clock at its start, cold)
        self.after_s = 0.0  # the latency timing after the runs
        self.images = (0, 0)  # train, val images of the dataset

    def started(self, key, arm: str | None, cold: bool = False) -> None:
        """A run begins (``cold``: on a worker just started); ``arm`` None: a run whose time is not an arm's (a
        start)."""
        self.running[key] = (arm, self.clock(), cold)

    def ended(self, key) -> float:
        """The run's seconds, recorded under its arm."""
        arm, t0, cold = self.running.pop(key, (None, self.clock(), False))
        s = self.clock() - t0
        if arm is not None:
            self.measured.setdefault(arm, []).append(s)
            self.cold.setdefault(arm, []).append(cold)
        return s

    def spawn_s(self) -> float:
        """Seconds a worker's start adds to its first run of a round: over the arms with cold and warm runs, the mean
        excess of the cold ones (0 when none has both)."""
        gaps = []
        for a, m in self.measured.items():
            c = np.asarray(self.cold.get(a, [False] * len(m)), bool)
            if c.any() and not c.all():
                gaps.append(np.mean(np.asarray(m)[c]) - np.mean(np.asarray(m)[~c]))
        return max(0.0, float(np.mean(gaps))) if gaps and self.spawns else 0.0

    def run_s(self, arm: str) -> float | None:
        """Expected seconds of a warm run of ``arm``: the mean of its measured runs (less the worker's start of cold
        ones); else its ``Work`` at the cost, scaled by how the measured arms' runs compare with their own prediction
        (the machine's load now); None: unknown."""
        spawn = self.spawn_s()
        if self.measured.get(arm):
            return float(np.mean(self.measured[arm]) - spawn * np.mean(self.cold.get(arm, [False])))
        if self.cost is None or arm not in self.work:
            return None
        pred = self.cost.seconds(self.work[arm])
        ratios = [self.run_s(a) / self.cost.seconds(self.work[a]) for a, m in self.measured.items()
                  if m and a in self.work]
        return pred * float(np.mean(ratios)) if ratios else pred

    def left_s(self, queue: list[str], rounds=None) -> float | None:
        """Seconds until the runs end and the latency is timed: the runs running (less their elapsed time), ``queue``
        (arms, in plan order, on the workers running) and, per simulated continuation of the rule, its ``rounds``
        (``future_rounds``; each on workers started afresh when ``spawns``), averaged. None when a run's seconds are
        unknown."""
        now, spawn = self.clock(), self.spawn_s()
        known = {a: self.run_s(a) for a in {*queue, *(a for r in rounds or [] for rr in r for a in rr),
                                            *(a for a, _, _ in self.running.values() if a is not None)}}
        if any(v is None for v in known.values()):
            return None
        busy = [max(0.0, known[a] + spawn * c - (now - t0)) for a, t0, c in self.running.values() if a is not None]
        t = makespan([known[a] for a in queue], self.workers, busy)

        def round_s(arms: list[str]) -> float:
            return makespan([known[a] + spawn * (i < self.workers) for i, a in enumerate(arms)], self.workers)

        if rounds:
            t += float(np.mean([sum(round_s(r) for r in sim) for sim in rounds]))
        return t + self.after_s
