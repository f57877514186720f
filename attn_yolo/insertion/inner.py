"""Attention into a base's own C2f / C3k2 / SPPF rows (``module=C3k2_CBAM``): the rows a site names, their new form.

``attn-yolo insert base=yolo11n.yaml module=C3k2_CBAM at=backbone`` puts no row in: it renames the chosen rows of the
base, ``[-1, 2, C3k2, [256, False, 0.25]]`` -> ``[-1, 2, C3k2_CBAM, [256, False, 0.25, {init_values: 0.0}]]``
(``attn_yolo.csp``: CBAM in every bottleneck), so every layer keeps its index, every ``from`` stays as it is, and
every base tensor keeps its state-dict key (the C3k2 convs are unchanged; CBAM adds ``m.<j>.attn.*``).

Sites for a derived block ``<base>_<X>`` select rows whose module is ``<base>``:

- ``backbone``: every ``<base>`` row of the backbone (yolo11: the C3k2 rows 2, 4, 6, 8; yolov8: C2f rows 2, 4, 6, 8;
  ``SPPF_<X>``: the SPPF row, also ``sppf``);
- ``neck``: every ``<base>`` row of the head before Detect (yolo11: 13, 16, 19, 22);
- layer indices of the base (``at=2,4``), each a ``<base>`` row.
"""

from __future__ import annotations

import inspect
import re

import torch

from attn_yolo.csp import AttnBottleneck, AttnSPPF, split_args
from attn_yolo.insertion.base import InsertionError
from attn_yolo.registry import CSP_BLOCKS, csp_name

PLACEMENT = (
    "inside the chosen rows' own blocks: X in every bottleneck of C2f / C3k2 (x + X(cv2(cv1(x))), also inside C3k), "
    "or before SPPF's last 1×1 conv, where objectdetection_script and ultralyticsPro put it; the rows keep their "
    "index and weights."
)


def derived_name(name) -> str | None:
    """The ``CSP_BLOCKS`` name of a module name (``C3k2_CBAM``, ``c3k2_cbam``, ``C3k2_CA``), or None."""
    if not isinstance(name, str):
        return None
    name = name.strip()
    return next((k for k in CSP_BLOCKS if k.lower() == name.lower()), None) or csp_name(name)


def base_of(name: str) -> str:
    """``C3k2`` for ``C3k2_CBAM``."""
    return CSP_BLOCKS[name].base.__name__


def rows(d: dict, name: str, at) -> tuple[list[int], list[str]]:
    """Base rows that ``<base>_<X>`` replaces for site spec ``at`` (see the module docstring), and the sites used.

    Raises:
        InsertionError: unknown site, an index that is not a ``<base>`` row, or a spec that selects no row (the
            message says where the base's ``<base>`` rows are, or which CSP block it has instead: C2f in yolov8).
    """
    all_rows = d["backbone"] + d["head"]
    nb, last, base = len(d["backbone"]), len(all_rows) - 1, base_of(name)
    where = {i for i, r in enumerate(all_rows[:last]) if r[2] == base}
    items = at.split(",") if isinstance(at, str) else list(at) if isinstance(at, (list, tuple)) else [at]
    out, used = set(), []
    for item in items:
        item = item.strip() if isinstance(item, str) else item
        if isinstance(item, str) and re.fullmatch(r"-?\d+", item):
            item = int(item)
        if isinstance(item, int) and not isinstance(item, bool):
            if item not in where:
                got = all_rows[item][2] if 0 <= item < len(all_rows) else "out of range"
                raise InsertionError(f"at={at!r}: layer {item} is {got}, not {base}; {name} replaces {base} rows: "
                            f"{', '.join(map(str, sorted(where))) or 'none in this base'}")
            out.add(item)
        elif item == "backbone" or (item == "sppf" and base == "SPPF"):
            out |= {i for i in where if i < nb}
        elif item == "neck":
            out |= {i for i in where if i >= nb}
        else:
            sppf = ", sppf" if base == "SPPF" else ""
            raise InsertionError(f"at={at!r}: {item!r} is not a site for {name}; allowed: backbone, neck{sppf} or "
                                 f"{base} row indices")
        used.append("inside")
    if not out:
        others = sorted({r[2] for r in all_rows if r[2] in ("C2f", "C3k2") and r[2] != base})
        hint = f"; its CSP blocks are {others[0]}: use module={others[0]}_{name.split('_', 1)[1]}" if others else ""
        found = f" ({base} rows: {', '.join(map(str, sorted(where)))})" if where else f"; the base has no {base} rows"
        raise InsertionError(f"module={name} at={at!r} selects no {base} row{found}{hint}")
    return sorted(out), used


def row_args(name: str, base_args: list, x_args: list) -> list:
    """The renamed row's args: the base row's own, then X's hyperparameters (``x_args``, positional as
    ``attn_yolo.insertion.rewire.block_args`` writes them) as one trailing mapping of those that differ from X's
    defaults (``init_values`` always), or nothing if none do."""
    params = [p for p in inspect.signature(CSP_BLOCKS[name].attention).parameters.values() if p.name != "c1"]
    kw = {p.name: (None if v == "None" else v) for p, v in zip(params, x_args)}
    kw = {k: v for k, v in kw.items() if k == "init_values" or v != params[[p.name for p in params].index(k)].default}
    return [*base_args, kw] if kw else list(base_args)


def with_identity(row: list) -> list:
    """A renamed row's args with ``init_values: 0.0`` in its X mapping (so X starts as the identity)."""
    args, kw = split_args(row[3])
    return [*args, {**kw, "init_values": 0.0}]


def replaces(base_row: list, row: list) -> bool:
    """Whether model row ``row`` is ``base_row`` with attention inside (``C3k2`` -> ``C3k2_<X>``, same repeats and
    args before X's mapping)."""
    name = csp_name(row[2])
    same = bool(name) and base_row[1] == row[1] and base_of(name) == base_row[2]
    return same and split_args(row[3])[0] == base_row[3]


def is_identity(layer: torch.nn.Module) -> bool:
    """Whether every attention block inside ``layer`` (a derived C2f / C3k2 / SPPF) has its LayerScale gate at 0."""
    gates = [getattr(getattr(m.attn, "scale", None), "gamma", None) for m in layer.modules()
             if isinstance(m, (AttnBottleneck, AttnSPPF))]
    return bool(gates) and all(isinstance(g, torch.Tensor) and bool((g == 0).all()) for g in gates)
