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


def is_int(v) -> bool:
    """``v`` is an int and not a bool (YAML ``true`` must not pass as 1)."""
    return isinstance(v, int) and not isinstance(v, bool)


def check_r(r, where: str, name: str = "r", paper: int = 16) -> None:
    """Check a channel reduction ratio (SE, CBAM, CoordAtt ``r``; GAM ``rate``): an int >= 1."""
    check(is_int(r) and r >= 1, where, name, r, f"an int >= 1 (paper: {paper})")


def check_odd_k(k, where: str, paper: int = 7) -> None:
    """Check a convolution kernel size ``k`` that keeps the map size with padding ``k // 2``: a positive odd int."""
    check(is_int(k) and k >= 1 and k % 2 == 1, where, "k", k, f"a positive odd int (paper: {paper})")


def group_count(groups, allowed: list[int], paper: int, where: str, name: str) -> int:
    """A block's group count: ``groups`` if given, which must be in ``allowed``; if None, the largest allowed value
    ``<= paper`` (the paper's count where it fits ``C``, else the nearest count below it that does).

    Raises:
        AttnBuildError: ``groups`` given and not in ``allowed``; the message lists ``allowed``.
    """
    if groups is None:
        return max(g for g in allowed if g <= paper)
    ok = is_int(groups) and groups in allowed
    check(ok, where, name, groups, f"{allowed}, or [] for the paper's {paper} adapted to C")
    return groups
