"""Views of the declarations: the public signatures each block accepts, plausible ranges, copies' defaults.

Each is derived from the blocks' declarations (``attn_yolo.nn.declaration``).

A public YAML row is written for the class its author copied, and Ultralytics passes the row's args to that class
positionally (after the input width, where the author's ``parse_model`` branch inserts it; verbatim otherwise). Each
block's declaration lists such classes (``Signature``: its call as published, where it comes from, and what each
positional arg after the input width is in terms of our block: ``hp``, ``ch``, ``unused``, ``fixed``; see
``attn_yolo.nn.declaration.Slot``). ``attn_yolo.conventions`` reads a row by the signatures its args fit (ours
first). ``PLAUSIBLE`` holds the range a hyperparameter takes in its paper's experiments, which tells a channel count
from a hyperparameter; ``DEFAULTS`` the defaults where the paper and the most-copied code differ.
"""

from __future__ import annotations

from attn_yolo.nn.declaration import UNPROVIDED, LiveMapping, Signature, blocks

__all__ = ["DEFAULTS", "PLAUSIBLE", "SIGNATURES", "UNPROVIDED", "max_args", "signatures"]

SIGNATURES: LiveMapping = LiveMapping(lambda: {n: list(d.signatures) for n, d in blocks().items() if d.signatures})
"""Block name -> the public signatures a row can be written for (ours, from the constructor, is tried first)."""

PLAUSIBLE: LiveMapping = LiveMapping(
    lambda: {(n, p.name): p.plausible for n, d in blocks().items() for p in d.params if p.plausible}
)
"""``(block, hyperparameter) -> (test, range)``: the values a hyperparameter takes in its paper's experiments. A
reading that puts a value outside its range loses to one that does not (``attn_yolo.conventions``); alone, it is
still built."""

DEFAULTS: LiveMapping = LiveMapping(
    lambda: {(n, p.name): (c.value, c.who, c.attr) for n, d in blocks().items() for p in d.params for c in p.copies}
)
"""``(block, hyperparameter) -> (value, who uses it, attribute)``: where the most-copied code's default differs from the
paper's. A row that leaves the hyperparameter out gets the paper's value and a log line with the edit for the other;
entries with the same ``who`` (one copy's defaults) share the line and the edit, and one whose value builds the same
block ``attribute`` at the row's width is not said; ``UNPROVIDED``: the copy builds a variant attn_yolo does not
provide (said, with no edit)."""


def signatures(name: str) -> list[Signature]:
    """The public signatures of block ``name`` (empty for a block without any)."""
    return SIGNATURES.get(name, [])


def max_args(name: str, params: list[str]) -> int:
    """The most args a row for block ``name`` may have: a leading channel count and the longest signature."""
    return 1 + max([len(params), *(len(s.slots) for s in signatures(name))])
