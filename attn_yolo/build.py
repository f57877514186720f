"""Where a block built from a YAML row learns its input width, row index and scale: the ``parse_model`` frame lookup.

Ultralytics' ``parse_model`` passes the YAML args of a module it does not know verbatim (``m(*args)``) and keeps the
width of every layer in a local list ``ch``. ``attn_yolo.registry`` therefore prepends the marker ``C1`` to the args of
every attention row (``[16, 7]`` becomes ``[c1, 16, 7]`` in Ultralytics' layer table), and the block, seeing ``C1``,
asks ``attn_yolo.nn.common.resolve_c1``, which calls ``yaml_row`` here: it reads the input width ``ch[f]``, the row
index ``i`` and the scale name from the ``parse_model`` frame, so every build error names them.
"""

from __future__ import annotations

import sys

from attn_yolo.nn import common
from attn_yolo.nn.common import Row

PARSE_MODEL_CODE = None
"""Code object of Ultralytics' own ``parse_model``; set by ``attn_yolo.registry.register`` before it wraps it."""


def yaml_row() -> Row | None:
    """Return the YAML row that Ultralytics' ``parse_model`` is building right now, or None outside ``parse_model``.

    Walks up the call stack to the frame of the original ``ultralytics.nn.tasks.parse_model`` (identified by its code
    object ``PARSE_MODEL_CODE``) and reads its loop variables ``i``, ``f``, ``ch`` and ``scale``
    (``attn_yolo.registry`` has already checked that ``f`` is a single layer index).
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not PARSE_MODEL_CODE:
        frame = frame.f_back
    if frame is None:
        return None
    loc = frame.f_locals
    return Row(i=loc["i"], c1=loc["ch"][loc["f"]], scale=loc.get("scale"))


common.ROW_LOOKUP = yaml_row
