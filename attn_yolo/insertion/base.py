"""The base of an insertion: a detect model YAML (or dict) loaded and checked, its rows and what they read.

``base`` is a path or the name of a detect YAML shipped with Ultralytics (``yolov8s.yaml``, ``yolo11n.yaml``,
``yolo26m.yaml``, ...; resolved by ``ultralytics.nn.tasks.yaml_model_load``). Supported heads: ``Detect`` (incl. the
YOLO26 end-to-end head, ``end2end: True``) and ``v10Detect``; segment/pose/obb/classify bases raise ``InsertionError``.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from attn_yolo.registry import check_yaml_modules

DETECT_HEADS = ("Detect", "v10Detect")


class InsertionError(ValueError):
    """Bad input to ``insert`` or ``transfer``: the message names the argument, the value and what is allowed."""



def load_base(base: str | Path | dict) -> dict:
    """Return the model dict of ``base``: a dict (copied), a YAML path, or the name of a YAML shipped with Ultralytics.

    The scale letter of the name is recorded as ``d["scale"]`` (``yolo11n.yaml`` -> ``"n"``; ``""`` if none).

    Raises:
        InsertionError: the file is missing, is not valid YAML, is not a detect model YAML, or a row is malformed
            (named by its row number in ``base``).
    """
    from ultralytics.nn.tasks import yaml_model_load

    if isinstance(base, dict):
        d, name = copy.deepcopy(base), str(base.get("yaml_file", "<dict>"))
    else:
        name = str(base)
        if not name.lower().endswith((".yaml", ".yml")):
            raise InsertionError(f"base={name!r}: expected a model YAML (path or Ultralytics name like yolo11n.yaml)")
        try:
            d = yaml_model_load(name)
        except (yaml.YAMLError, ValueError) as e:  # Ultralytics' YAML.load re-raises syntax errors as ValueError
            msg = " ".join(str(e).split("Verify YAML")[0].split())
            raise InsertionError(f"base={name!r} is not valid YAML: {msg}") from None
        except (FileNotFoundError, OSError) as e:
            raise InsertionError(
                f"base={name!r}: no such file, and not a model YAML shipped with Ultralytics "
                f"(e.g. yolov8n.yaml, yolo11s.yaml, yolo26m.yaml): {e}"
            ) from None
    rows_ok = all(isinstance(d.get(k) if isinstance(d, dict) else None, list) and d[k] for k in ("backbone", "head"))
    if not rows_ok:
        raise InsertionError(f"base={name!r} is not a model YAML: it needs non-empty 'backbone' and 'head' lists")
    try:
        check_yaml_modules(d)  # rows numbered as in the user's base, before any insertion renumbers them
    except (ValueError, KeyError) as e:
        raise InsertionError(f"base={name!r}: {e}") from None
    head = d["head"][-1][2]
    if head not in DETECT_HEADS:
        from ultralytics.nn.tasks import guess_model_task

        task = guess_model_task(d) or "non-detect"
        raise InsertionError(
            f"base={name!r} is a {task} model (last layer {head}); insert supports detect bases, whose last layer is "
            f"one of {', '.join(DETECT_HEADS)} (e.g. yolo11n.yaml, not yolo11n-seg.yaml)"
        )
    return d


def model_rows(d: dict) -> list[list]:
    return d["backbone"] + d["head"]


def row_targets(f, i: int) -> list[int]:
    """Absolute layer indices a row ``i`` with ``from`` field ``f`` reads (-1 at row 0 is the input image)."""
    return [x if x >= 0 or i == 0 else i + x for x in (f if isinstance(f, list) else [f])]
