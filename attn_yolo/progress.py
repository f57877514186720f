"""A progress bar on one terminal line (tqdm) for long work, silent where the output is not a terminal."""

from __future__ import annotations

import sys


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (``isatty``); False for files, pipes, CI logs, closed streams."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def width(stream) -> dict:
    """tqdm's size arguments for ``stream``: redrawn to the terminal's width (``dynamic_ncols``), or, where the
    terminal reports a size of 0 (a pseudo-terminal without one: ``script``, ``docker exec -t``, where tqdm would hide
    its bar as off the screen), a fixed size from ``shutil.get_terminal_size`` (``$COLUMNS`` / ``$LINES``, else 80 x
    24)."""
    import os
    import shutil

    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):  # no file descriptor: tqdm draws it at full length
        return {"dynamic_ncols": True}
    if size.columns > 0 and size.lines > 0:
        return {"dynamic_ncols": True}
    fallback = shutil.get_terminal_size()
    return {"ncols": fallback.columns, "nrows": fallback.lines}


def bar(iterable=None, desc: str = "", total: int | None = None, unit: str = "it", file=None):
    """``tqdm`` over ``iterable`` on one line of ``file`` (default: stderr, read when called), redrawn in place and
    cleared when done (``leave=False``); disabled, writing nothing, when ``file`` is not a terminal (a log file, a
    pipe, CI), so that logs hold no bar frames. Use it as the iterable, or as a context manager with ``update``."""
    from tqdm import tqdm

    file = sys.stderr if file is None else file
    return tqdm(iterable, desc=desc, total=total, unit=unit, file=file, leave=False, mininterval=0.2,
                disable=not is_terminal(file), **width(file))
