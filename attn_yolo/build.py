"""Where a block built from a YAML row learns its input width, and how it reports a bad hyperparameter.

Ultralytics' ``parse_model`` passes the YAML args of a module it does not know verbatim (``m(*args)``) and keeps the
width of every layer in a local list ``ch``. ``attn_yolo.registry`` therefore prepends the marker ``C1`` to the args of
every attention row (``[16, 7]`` becomes ``[c1, 16, 7]`` in Ultralytics' layer table), and the block, seeing ``C1``,
reads its input width ``ch[f]`` from the ``parse_model`` frame; the row index ``i`` and the scale name come from the same
place, so every build error names them. Built directly (``SE(256)``), a block takes its width as the first argument
like any PyTorch layer.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


class _InferredC1:
    """Marker for "input width taken from the YAML row"; prints as ``c1`` in Ultralytics' layer table."""

    def __repr__(self) -> str:
        return "c1"


C1 = _InferredC1()


class AttnBuildError(ValueError):
    """A block got a hyperparameter outside its allowed range; the message names the row, module, value and range."""


@dataclass(frozen=True)
class Row:
    """The YAML row being built: its index ``i``, input width ``c1`` and model scale."""

    i: int
    c1: int
    scale: str | None


def yaml_row() -> Row | None:
    """Return the YAML row that Ultralytics' ``parse_model`` is building right now, or None outside ``parse_model``.

    Walks up the call stack to the frame of the original ``ultralytics.nn.tasks.parse_model`` (identified by its code
    object, saved when ``attn_yolo`` registers) and reads its loop variables ``i``, ``f``, ``ch`` and ``scale``
    (``attn_yolo.registry`` has already checked that ``f`` is a single layer index).
    """
    from attn_yolo.registry import PARSE_MODEL_CODE

    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not PARSE_MODEL_CODE:
        frame = frame.f_back
    if frame is None:
        return None
    loc = frame.f_locals
    return Row(i=loc["i"], c1=loc["ch"][loc["f"]], scale=loc.get("scale"))


def resolve_c1(c1, name: str) -> tuple[int, str]:
    """Return ``(input width, context)`` for a block: ``c1`` as given, or, for ``C1``, the YAML row's input width.

    ``context`` prefixes error messages, e.g. ``"row 5 (scale n) SE"`` or ``"SE"``.

    Raises:
        AttnBuildError: if ``c1`` is ``C1`` outside ``parse_model``, or is not a positive integer.
    """
    row = yaml_row() if c1 is C1 else None
    if row is not None:
        c1, where = row.c1, f"row {row.i}{f' (scale {row.scale})' if row.scale else ''} {name}"
    else:
        where = name
    if not isinstance(c1, int) or isinstance(c1, bool) or c1 < 1:
        raise AttnBuildError(f"{where}: input channels c1={c1!r}; expected a positive int (or build it from a YAML row)")
    return c1, where


def check(ok: bool, where: str, what: str, value, allowed: str) -> None:
    """Raise ``AttnBuildError('<where>: <what>=<value> is invalid; allowed: <allowed>')`` unless ``ok``."""
    if not ok:
        raise AttnBuildError(f"{where}: {what}={value!r} is invalid; allowed: {allowed}")


def check_r(r, where: str) -> None:
    """Check a channel reduction ratio ``r`` (SE, CBAM): an int >= 1."""
    check(isinstance(r, int) and not isinstance(r, bool) and r >= 1, where, "r", r, "an int >= 1 (paper: 16)")
