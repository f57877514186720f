"""The ablation's console: one progress line per run, each run's full Ultralytics output in its train.log.

The ablation's console: one line per run under an overall progress bar (Ultralytics' TQDM), each run's full
Ultralytics output in its run folder's ``train.log``; ``verbose=True`` shows that output on the terminal too.
"""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def quiet_ultralytics(verbose: bool = False):
    """Ultralytics' INFO lines (``Overriding model.yaml nc=80 ...``, layer tables) off while the ablation builds and
    times its models in this process; warnings stay. No-op when ``verbose``."""
    from ultralytics.utils import LOGGER

    level = LOGGER.level
    if not verbose:
        LOGGER.setLevel(logging.WARNING)
    try:
        yield
    finally:
        LOGGER.setLevel(level)


class Progress:
    """The terminal view of an ablation: a bar over this session's runs (``ultralytics.utils.TQDM``) whose time left
    is the mean measured run time × the runs left (divided among parallel workers, as the bar's own rate is measured
    over the whole session); before the first run ends, the first-run estimate (dataset size × ``fraction``,
    epochs, one timed step) is shown instead. One line is printed per finished run."""

    def __init__(self, total: int, verbose: bool = False):
        from ultralytics.utils import TQDM

        self.verbose = verbose
        self.bar = TQDM(total=max(total, 1), desc="attn-yolo ablate", unit="run", disable=total == 0 or None,
                        mininterval=0, file=sys.stdout)  # redrawn only at a run's start and end: each redraw shows
        self.bar.RATE_SMOOTHING_FACTOR = 0.0  # rate = runs done / elapsed over the session, not a smoothed burst

    def line(self, text: str) -> None:
        """Print one line above the bar."""
        self.bar.clear()
        print(text, flush=True)
        self.bar.refresh()

    def running(self, text: str) -> None:
        """Show what runs now (and the ETA before a run has ended) in the bar."""
        self.bar.desc = f"attn-yolo ablate: {text}"
        if self.verbose:
            self.line(f"\n{text}")
        self.bar.refresh()

    def done(self, text: str) -> None:
        """One line for a finished run, and the bar moved on."""
        self.bar.clear()
        print(text, flush=True)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
