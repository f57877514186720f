"""What every block shares: the inferred-width marker ``C1``, input-width resolution and hyperparameter checks.

A block built from a YAML row gets the marker ``C1`` instead of its input width. ``resolve_c1`` then asks the row
lookup, installed by ``attn_yolo.build`` (the layer above), for the row being built: its input width, index and scale.
The blocks therefore depend on nothing above this package; built directly (``SE(256)``), a block takes its width as the
first argument like any PyTorch layer.
"""

from __future__ import annotations

from typing import Callable, NamedTuple


class _InferredC1:
    """Marker for "input width taken from the YAML row"; prints as ``c1`` in Ultralytics' layer table."""

    def __repr__(self) -> str:
        return "c1"


C1 = _InferredC1()


class AttnBuildError(ValueError):
    """A block got a hyperparameter outside its allowed range; the message names the row, module, value and range."""


class Row(NamedTuple):
    """The YAML row being built: its index ``i``, input width ``c1`` and model scale (None if the YAML has none)."""

    i: int
    c1: int
    scale: str | None


ROW_LOOKUP: Callable[[], Row | None] = lambda: None  # noqa: E731  replaced by attn_yolo.build.yaml_row on import


def resolve_c1(c1, name: str) -> tuple[int, str]:
    """Return ``(input width, context)`` for a block: ``c1`` as given, or, for ``C1``, the YAML row's input width.

    ``context`` prefixes error messages, e.g. ``"row 5 (scale n) SE"`` or ``"SE"``.

    Raises:
        AttnBuildError: if ``c1`` is ``C1`` outside a YAML build, or is not a positive integer.
    """
    row = ROW_LOOKUP() if c1 is C1 else None
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
