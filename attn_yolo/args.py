"""Ultralytics-style ``key=value`` argument parsing and ``UsageError``, shared by every tool and the CLI."""

from __future__ import annotations

import difflib


class UsageError(ValueError):
    """Bad user input (a key, value, file or config row); the CLI prints the message and exits with code 2."""


def kv_args(argv: list[str], defaults: dict, tool: str) -> dict:
    """Parse Ultralytics-style ``key=value`` arguments against ``defaults`` (values parsed with ``smart_value``).

    Returns:
        dict: ``defaults`` updated with the given values.

    Raises:
        UsageError: for a token without ``=`` or an unknown key (naming the closest allowed key).
    """
    from ultralytics.cfg import smart_value

    out = dict(defaults)
    for tok in argv:
        key, eq, value = tok.partition("=")
        if not eq or not key:
            raise UsageError(f"attn-yolo {tool}: expected key=value, got {tok!r}; keys: {', '.join(defaults)}")
        if key not in defaults:
            close = difflib.get_close_matches(key, list(defaults), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UsageError(f"attn-yolo {tool}: unknown key {key!r}.{hint} Keys: {', '.join(defaults)}")
        out[key] = smart_value(value)
    return out


MIN_IMGSZ = 32
"""Smallest image side any tool takes, pixels: the model's largest stride (a P5 map of 1×1)."""
MAX_IMGSZ = 4096
"""Largest image side any tool takes, pixels (export verifies PyTorch and onnxruntime at this size and larger)."""


def _side_ok(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and MIN_IMGSZ <= v <= MAX_IMGSZ


def imgsz_problem(v, pair: bool = False) -> str | None:
    """Why ``v`` is not an image size the tools take, or None: an int in ``MIN_IMGSZ..MAX_IMGSZ`` pixels (rounded up to
    a multiple of the model's stride by Ultralytics' ``check_imgsz``) or, with ``pair``, ``[h, w]`` of two such ints.
    One range for ``attn-yolo export``, ``heatmap``, ``bench``, ``ablate`` (``train.imgsz``) and the pass-through
    commands.

    Returns:
        str | None: the allowed values, e.g. ``"an int in 32..4096 (pixels; ...)"``, for the caller's message.
    """
    if _side_ok(v) or (pair and isinstance(v, (list, tuple)) and len(v) == 2 and all(_side_ok(x) for x in v)):
        return None
    sides = f"an int in {MIN_IMGSZ}..{MAX_IMGSZ} (pixels; rounded up to a multiple of the stride, 32)"
    return sides + (", or h,w of two such ints (e.g. 480,640)" if pair else "")


def batch_problem(v) -> str | None:
    """Why ``v`` is not an Ultralytics training batch, or None: a positive int, -1 (auto batch at 60 % of the GPU
    memory) or a float in (0, 1) (auto batch at that fraction), as ``ultralytics.utils.autobatch`` reads it; any
    other value below 1 would start auto batch at 60 % silently (the rule of an ablation's ``train.batch``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None  # a wrong type is Ultralytics' check_cfg's to name
    if (isinstance(v, int) and (v >= 1 or v == -1)) or (isinstance(v, float) and 0 < v < 1):
        return None
    return "a positive int, -1 (auto batch at 60% of GPU memory) or a float in (0, 1) (auto batch at that fraction)"
