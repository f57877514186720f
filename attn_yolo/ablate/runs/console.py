"""The ablation's console: one progress line per run, each run's full Ultralytics output in its train.log.

The ablation's console: one line per run under an overall progress bar (Ultralytics' TQDM), each run's full
Ultralytics output in its run folder's ``train.log``; ``verbose=True`` shows that output on the terminal too.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import warnings
from pathlib import Path

LOG_NAME = "train.log"  # in each run folder: everything Ultralytics printed during the run
RAY_TUNE_WARNING = r"`get_trial_id` is meant to only be called inside a function"  # Ultralytics' raytune callback


def quiet_ray_tune() -> None:
    """Silence Ray's ``get_trial_id`` UserWarning: Ultralytics' raytune callback asks for a Tune trial on every epoch,
    and outside a Tune session Ray warns each time."""
    warnings.filterwarnings("ignore", message=RAY_TUNE_WARNING, category=UserWarning)


class _Tee:
    """A text stream writing to several (the log file, and the terminal when verbose)."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def to_log(path: Path, verbose: bool = False):
    """Send Ultralytics' output (its ``LOGGER``, ``print``, progress bars, warnings) to the file ``path`` for the
    duration, and also to the terminal when ``verbose``."""
    from ultralytics.utils import LOGGER

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        stream = _Tee(f, sys.__stdout__ if sys.stdout is None else sys.stdout) if verbose else f
        handlers = [h for h in LOGGER.handlers if type(h) is logging.StreamHandler]  # its console handler
        old = [h.setStream(stream) for h in handlers]
        try:
            with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
                yield
        finally:
            for h, s in zip(handlers, old):
                h.setStream(s)


class LoggedRunner:
    """``runner(spec, device)`` with its output in ``<spec.run_dir>/train.log`` (picklable: runs in worker
    processes and Ray tasks too, whose log then comes back with the run folder)."""

    def __init__(self, runner, verbose: bool = False):
        self.runner, self.verbose = runner, verbose

    def __call__(self, spec, device):
        quiet_ray_tune()
        with to_log(Path(spec.run_dir) / LOG_NAME, self.verbose):
            return self.runner(spec, device)


def own_lines(record: logging.LogRecord) -> bool:
    """The lines a quiet Ultralytics logger still passes: warnings, and attn-yolo's own (``attn-yolo: row 11 ...
    read as ...``: how a row written for other code was read, with the edit for the author's meaning)."""
    return record.levelno >= logging.WARNING or record.getMessage().startswith("attn-yolo: ")


@contextlib.contextmanager
def quiet_ultralytics(verbose: bool = False):
    """Ultralytics' INFO lines (``Overriding model.yaml nc=80 ...``, layer tables) off while the ablation builds and
    times its models in this process; warnings stay, and so do attn-yolo's lines on how a public YAML's rows were
    read (``own_lines``: a row is never read silently another way). No-op when ``verbose``."""
    from ultralytics.utils import LOGGER

    keep = functools.partial(own_lines)  # one filter per context: a nested one leaves the outer in place
    if not verbose:
        LOGGER.addFilter(keep)
    try:
        yield
    finally:
        LOGGER.removeFilter(keep)


def interrupted_words(begun: dict, ended: set, planned: dict) -> str:
    """What an interrupt left of the runs it cut short (begun, not ended): each one's folder stays, unfinished and
    without a record, and is redone from the start when the same command runs again; '' when none was running."""
    cut = [Path(planned[k].run_dir).name for k in begun if k not in ended and k in planned]
    if not cut:
        return ""
    return (f"The interrupted run folder{'s' * (len(cut) > 1)} {', '.join(f'runs/{c}' for c in cut)} "
            f"stay{'s' * (len(cut) == 1)} (unfinished, no record) and {'is' if len(cut) == 1 else 'are'} redone from "
            "the start next time. ")


PHASES = ("dataset", "start", "runs")  # an ablation's phases, in order, as the terminal names them


def phase_line(phase: str, text: str) -> str:
    """A line of one phase: ``attn-yolo ablate: [start] training the shared start once``."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    return f"attn-yolo ablate: [{phase}] {text}"


class Progress:
    """The terminal view of an ablation, named by phase (``PHASES``: the dataset, the shared start, the runs).

    On a terminal, one bar (``tqdm``) over this session's runs shows the phase, what runs now and one time left, the
    runner's (the mean measured run time × the runs left, divided among the workers; before the first run ends, the
    first-run estimate): the bar's own rate-based remaining time is not drawn. Every other line goes above the bar
    through ``tqdm.write``, so no message is glued into a bar frame. Elsewhere (a log file, a pipe, CI) there are no
    bar frames and no carriage returns: each line is printed as it comes, with the first time left once.
    """

    def __init__(self, total: int, verbose: bool = False, file=None):
        self.verbose, self.total, self.file = verbose, total, file if file is not None else sys.stdout
        self.tty = bool(getattr(self.file, "isatty", lambda: False)()) and total > 0
        self.phase, self.eta, self.bar = None, None, None
        if self.tty:
            from tqdm import tqdm

            from attn_yolo.progress import width

            self.bar = tqdm(total=total, desc="attn-yolo ablate", unit="run", file=self.file, mininterval=0,
                            bar_format="{desc} {percentage:3.0f}%|{bar:12}| {n}/{total} runs, {elapsed} elapsed"
                            "{postfix}", **width(self.file))  # fmt: skip

    def line(self, text: str) -> None:
        """Print one line (above the bar on a terminal)."""
        if self.bar is not None:
            self.bar.write(text, file=self.file)
        else:
            print(text, file=self.file, flush=True)

    def enter(self, phase: str, text: str) -> None:
        """Begin ``phase`` (``PHASES``), with its line; the bar names it from now on."""
        self.phase = phase
        self.line(phase_line(phase, text))
        if self.bar is not None:
            self.bar.set_description_str(f"attn-yolo ablate [{phase}]")

    def running(self, text: str, eta: str | None = None) -> None:
        """What runs now and the time left (``eta``): in the bar on a terminal; elsewhere the first time left is
        printed once (and every run's start when ``verbose``). The first call begins the runs phase."""
        if self.phase != "runs":
            self.enter("runs", f"{self.total} run(s) to go" + (f", ETA {eta}" if eta else ""))
        elif not self.tty and self.eta is None and eta:
            self.line(f"attn-yolo ablate: [runs] ETA {eta}")
        self.eta = eta or self.eta
        if self.bar is not None:
            self.bar.set_description_str(f"attn-yolo ablate [runs] {text}")
            self.bar.set_postfix_str(f"ETA {eta}" if eta else "")
        elif self.verbose:
            self.line(text)

    @contextlib.contextmanager
    def epochs(self, run_dir: Path, total: int, every_s: float = 0.5):
        """While a run trains into ``run_dir`` (the shared start: minutes), its epochs on the bar: ``epoch 2/5, ~01:30
        left`` (mm:ss) from the rows Ultralytics adds to its results.csv at each epoch's end (the time left at the
        mean epoch so far), read every ``every_s`` seconds by a thread. Off a terminal nothing is shown."""
        if self.bar is None:
            yield
            return
        import threading

        from attn_yolo.ablate.runs.records import epoch_table

        stop = threading.Event()

        def watch():
            while not stop.wait(every_s):
                ends = [t for t in epoch_table(Path(run_dir) / "results.csv").get("time", []) if t == t]
                left = ends[-1] / len(ends) * (total - len(ends)) if ends else None
                left = f", ~{self.bar.format_interval(left)} left" if left is not None else ""
                self.bar.set_postfix_str(f"epoch {len(ends)}/{total}{left}")

        t = threading.Thread(target=watch, name="attn-yolo-epochs", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()
            self.bar.set_postfix_str("")

    def done(self, text: str) -> None:
        """One line for a finished run, and the bar moved on."""
        self.line(text)
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
