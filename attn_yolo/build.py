"""Where a block built from a YAML row learns its input width, row index and scale: the ``parse_model`` frame lookup.

Ultralytics' ``parse_model`` passes the YAML args of a module it does not know verbatim (``m(*args)``) and keeps the
width of every layer built so far in a local list ``ch``. ``attn_yolo.registry`` therefore replaces the args of every
attention row by one row marker, and the block, seeing it, asks ``attn_yolo.conventions``, which calls ``yaml_row``
here: it reads the row index ``i``, its ``from`` field ``f``, the widths ``ch`` and the scale name from the
``parse_model`` frame, so the block gets its input width and every build error names the row.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

PARSE_MODEL_CODE = None
"""Code object of Ultralytics' own ``parse_model``; set by ``attn_yolo.registry.register`` before it wraps it."""


class Row(NamedTuple):
    """The YAML row ``parse_model`` is building: index ``i``, ``from`` field ``f``, widths so far, scale, locals.

    ``ch[t]`` is the built output width of layer ``t < i`` (``ch[-1]`` at row 0: the input channels); ``scale`` is
    None if the YAML has no ``scales``; ``names`` are ``parse_model``'s local variables, which Ultralytics uses to
    evaluate string args (``"nc"``).
    """

    i: int
    f: int | list
    ch: list[int]
    scale: str | None
    names: dict

    @property
    def c1(self) -> int:
        """The input width of an attention row (its ``from`` is a single index, checked by ``attn_yolo.registry``)."""
        return self.ch[self.f]


def yaml_row() -> Row | None:
    """Return the YAML row that Ultralytics' ``parse_model`` is building right now, or None outside ``parse_model``.

    Walks up the call stack to the frame of the original ``ultralytics.nn.tasks.parse_model`` (identified by its code
    object ``PARSE_MODEL_CODE``) and reads its loop variables ``i``, ``f``, ``ch`` and ``scale``.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not PARSE_MODEL_CODE:
        frame = frame.f_back
    if frame is None:
        return None
    loc = frame.f_locals
    return Row(i=loc["i"], f=loc["f"], ch=list(loc["ch"]), scale=loc.get("scale"), names=dict(loc))


def failed_row(tb) -> int | None:
    """Index of the row ``parse_model`` was building when the exception with traceback ``tb`` was raised, or None."""
    i = None
    while tb is not None:
        if tb.tb_frame.f_code is PARSE_MODEL_CODE:
            i = tb.tb_frame.f_locals.get("i")
        tb = tb.tb_next
    return i
