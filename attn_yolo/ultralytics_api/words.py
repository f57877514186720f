"""Ultralytics' CLI first words (modes, tasks, special commands, config keys), read from its files, not imported.

The ``attn-yolo`` console (``attn_yolo_console``) answers a mistyped first word before torch is imported, so this
module imports nothing but the standard library and PyYAML, and the console loads it by its file path. Ultralytics
8.4.190 writes ``MODES = (...)`` and ``TASKS = (...)`` at the top of ``ultralytics/cfg/__init__.py``, the special
commands as the ``special = {...}`` dict of ``entrypoint`` there, and its config keys in ``cfg/default.yaml``
(``CONTRACT``: "Ultralytics' first words are readable from its files").
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import NamedTuple

SPECIAL_DICT = "special"  # the name of entrypoint's dict of special commands


def special_keys(tree: ast.AST) -> tuple[str, ...]:
    """The string keys of the first ``special = {...}`` dict literal in ``tree`` (Ultralytics' ``entrypoint``)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == SPECIAL_DICT for t in node.targets)):
            return tuple(k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return ()


def _constant_strings(tree: ast.Module, name: str) -> tuple[str, ...]:
    """A module-level ``NAME = (...)`` / ``[...]`` / ``{...}`` / ``frozenset({...})`` of string constants."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call) and value.args:  # frozenset({...}), set((...))
                value = value.args[0]
            if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
                return tuple(e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return ()


def ultralytics_dir() -> Path | None:
    """Where the ``ultralytics`` package is installed, found without importing it (None: not installed)."""
    spec = importlib.util.find_spec("ultralytics")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


class FirstWords(NamedTuple):
    """Ultralytics' modes (``train``, ``val``, ...), and every first word its CLI takes (``words``)."""

    modes: tuple[str, ...]
    words: frozenset[str]


def first_words(root: Path | None = None) -> FirstWords | None:
    """Every first word Ultralytics' CLI takes as a command: its modes, tasks, special commands (each also as its
    first letter and without a plural ``s``, as ``entrypoint`` matches them) and config keys (``yolo verbose``).

    Args:
        root: the ``ultralytics`` package folder (default: the installed one, ``ultralytics_dir()``).

    Returns:
        The modes and all the words, or None when the files are missing or no longer hold the lists (the caller
        then leaves the word to Ultralytics' own CLI).
    """
    import yaml

    root = root or ultralytics_dir()
    try:
        tree = ast.parse((root / "cfg" / "__init__.py").read_text(encoding="utf-8"))
        keys = yaml.safe_load((root / "cfg" / "default.yaml").read_text(encoding="utf-8"))
    except (OSError, TypeError, SyntaxError, yaml.YAMLError):
        return None
    modes, tasks, special = _constant_strings(tree, "MODES"), _constant_strings(tree, "TASKS"), special_keys(tree)
    if not (modes and tasks and special and isinstance(keys, dict)):
        return None
    forms = {v for k in special for v in (k, k[0], k[:-1] if k.endswith("s") else k)}
    return FirstWords(modes, frozenset({*modes, *tasks, *forms, *map(str, keys)}))
