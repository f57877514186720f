"""What every block shares: its build error and the checks of its input width and hyperparameters.

A block takes its input width as its first argument and its hyperparameters as plain values, like any PyTorch layer
(``SE(256, r=16)``); reading a YAML row (its input width, the public signatures its args are written for) is the
registry's YAML builder's work (``attn_yolo.registry``, ``attn_yolo.conventions``), not the block's.
"""

from __future__ import annotations

import math


class AttnBuildError(ValueError):
    """A block got a hyperparameter outside its allowed range; the message names the row, module, value and range."""


def check_c1(c1, where: str) -> str:
    """Check a block's input width ``c1`` (a positive int) and return ``where``, the context of its error messages
    (the block's name; a YAML row's builder, ``attn_yolo.registry``, replaces it by the row, scale and module).

    Raises:
        AttnBuildError: ``c1`` not a positive int.
    """
    if not is_int(c1) or c1 < 1:
        raise AttnBuildError(f"{where}: input channels c1={c1!r}; expected a positive int")
    return where


def is_int(x) -> bool:
    """True for an ``int`` that is not a ``bool`` (YAML ``true`` is no channel count)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x) -> bool:
    """True for a finite ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check(ok: bool, where: str, what: str, value, allowed: str) -> None:
    """Raise ``AttnBuildError('<where>: <what>=<value> is invalid; allowed: <allowed>')`` unless ``ok``."""
    if not ok:
        raise AttnBuildError(f"{where}: {what}={value!r} is invalid; allowed: {allowed}")


def check_r(r, where: str, c1: int | None = None, name: str = "r", paper: int = 16) -> None:
    """Check a channel reduction ratio (SE, CBAM, CoordAtt ``r``; GAM ``rate``): an int >= 1; with ``c1``, at most
    ``c1``, so the hidden width ``C // r >= 1`` (blocks whose hidden width has a floor, like CoordAtt's, pass none)."""
    if c1 is None:
        check(is_int(r) and r >= 1, where, name, r, f"an int >= 1 (paper: {paper})")
    else:
        allowed = f"an int in 1..{c1} (hidden width C // {name} >= 1 at C={c1}; paper: {paper})"
        check(is_int(r) and 1 <= r <= c1, where, name, r, allowed)


def check_kernel(k, where: str) -> None:
    """Check CBAM's spatial kernel ``k`` (SAM, CBAM): the int 3 or 7."""
    check(is_int(k) and k in (3, 7), where, "k", k, "the int 3 or 7 (spatial kernel, paper: 7)")


def check_odd_k(k, where: str, paper: int = 7) -> None:
    """Check a convolution kernel size ``k`` that keeps the map size with padding ``k // 2``: a positive odd int."""
    check(is_int(k) and k >= 1 and k % 2 == 1, where, "k", k, f"a positive odd int (paper: {paper})")


def check_init_values(init_values, where: str) -> None:
    """Check a residual gate init (every block): None, or a finite number in ``[0, 1]``."""
    ok = init_values is None or (is_number(init_values) and 0 <= init_values <= 1)
    check(ok, where, "init_values", init_values, "None (no gate) or a number in [0, 1] (0.0: identity at init)")


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
