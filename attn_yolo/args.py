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
