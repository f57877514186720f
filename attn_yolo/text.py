"""How every message and report writes a closest-name hint, a number and an interval: one formatter each.

``did_you_mean`` is the one "did you mean" of the package (unknown keys, blocks, sites, formats, commands), in one of
two forms: inline, ``unknown key (did you mean 'conf'?)``, or as a sentence, ``unknown key 'cnf'. Did you mean
'conf'? ...``. ``number`` writes a figure or a marker for a missing one; ``bracket`` writes an interval, and an
unbounded one always as ``[unbounded]``.
"""

from __future__ import annotations

import difflib
import math
import numbers


def closest(name, names, cutoff: float = 0.6) -> str | None:
    """The name of ``names`` closest to ``name`` (``difflib``'s ratio at least ``cutoff``), or None."""
    close = difflib.get_close_matches(str(name), [str(n) for n in names], n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name, names, cutoff: float = 0.6, sentence: bool = False, quoted: str | None = None) -> str:
    """The hint for an unknown ``name``: `` (did you mean 'x'?)``, with ``sentence`` `` Did you mean 'x'?``; ``""``
    when no name of ``names`` is close (``closest``). ``quoted``: what to write for ``x`` (e.g. ``attn-yolo x``)."""
    close = closest(name, names, cutoff)
    if close is None:
        return ""
    x = (quoted or "{}").format(close)
    return f" Did you mean {x!r}?" if sentence else f" (did you mean {x!r}?)"


def missing(x) -> bool:
    """Whether ``x`` is no figure: None, not a number, NaN or infinite."""
    return isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x)


def number(x, dec: int = 4, sign: bool = False, none: str = "n/a") -> str:
    """A figure with ``dec`` decimals (``sign``: with its sign, ``+0.0012``); ``none`` when it is ``missing``."""
    if missing(x):
        return none
    return f"{x:+.{dec}f}" if sign else f"{x:.{dec}f}"


def bracket(lo, hi, dec: int = 4) -> str:
    """An interval as every report writes it: ``[+0.0012, +0.0034]``; ``[unbounded]`` when a bound is infinite,
    ``n/a`` when there is none (None or NaN)."""
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "n/a"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "[unbounded]"
    return f"[{lo:+.{dec}f}, {hi:+.{dec}f}]"
