"""A progress bar on one terminal line (tqdm) for long work, silent where the output is not a terminal."""

from __future__ import annotations

import sys


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (``isatty``); False for files, pipes, CI logs, closed streams."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def bar(iterable=None, desc: str = "", total: int | None = None, unit: str = "it", file=None):
    """``tqdm`` over ``iterable`` on one line of ``file`` (default: stderr, read when called), redrawn in place and
    cleared when done (``leave=False``); disabled, writing nothing, when ``file`` is not a terminal (a log file, a
    pipe, CI), so that logs hold no bar frames. Use it as the iterable, or as a context manager with ``update``."""
    from tqdm import tqdm

    file = sys.stderr if file is None else file
    return tqdm(iterable, desc=desc, total=total, unit=unit, file=file, leave=False, dynamic_ncols=True,
                mininterval=0.2, disable=not is_terminal(file))
