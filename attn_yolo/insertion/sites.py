"""Insertion sites: ``at=`` (a site name, layer indices) resolved to the base layers a block follows.

Sites (``at``), as the literature places attention in YOLO:

- ``backbone``: after each backbone layer that a head row reads (the P3/P4/P5 outputs the neck taps; for YOLO11 layers
  4, 6 and 10, the last one reached by the first head row's ``-1``).
- ``sppf``: after the last backbone layer (SPPF in YOLOv8, C2PSA after SPPF in YOLO11/YOLO26): P5, fewest tokens.
- ``neck``: after each layer Detect reads, so Detect sees the attended maps.
- layer indices of the base (``at=4,6,10``); any layer but the Detect row.
"""

from __future__ import annotations

import re

from attn_yolo.insertion import inner
from attn_yolo.insertion.base import InsertionError, model_rows, row_targets
from attn_yolo.text import did_you_mean

SITES = ("backbone", "sppf", "neck")

PLACEMENT = {
    "backbone": "at the backbone outputs that the neck taps, so the attended P3/P4/P5 maps feed every FPN/PAN path "
    "(and Detect through them), where the SE/CBAM-in-YOLO literature puts channel and spatial attention. Chosen over "
    "the neck outputs because one block per scale then benefits the top-down and the bottom-up paths alike.",
    "sppf": "after the last backbone layer (P5, stride 32), where tokens are fewest (400 at 640 px): global "
    "self-attention stays cheap there (O(N²) in tokens), as in BoTNet (Srinivas et al., CVPR 2021) and Ultralytics' "
    "own C2PSA; every neck path and Detect's P5 branch read it.",
    "neck": "at the maps Detect reads (the FPN/PAN outputs), so the attention re-weights exactly the fused features "
    "the detection head sees.",
    "layers": "at the layers chosen explicitly.",
    "inside": inner.PLACEMENT,
}



def resolve_sites(d: dict, at) -> tuple[list[int], list[str]]:
    """Base layer indices for a site spec ``at`` (a site name, an index, or a list / comma string of them).

    Returns:
        (indices, site names used) with indices sorted and unique.

    Raises:
        InsertionError: unknown site, an index out of range (the Detect row is not a valid site), or a site given
            twice (``at=4,4``).
    """
    rows, nb = model_rows(d), len(d["backbone"])
    last = len(rows) - 1
    items = at.split(",") if isinstance(at, str) else list(at) if isinstance(at, (list, tuple)) else [at]
    out, names, seen = set(), [], []
    for item in items:
        item = item.strip() if isinstance(item, str) else item
        if isinstance(item, str) and re.fullmatch(r"-?\d+", item):
            item = int(item)
        if item in seen and not isinstance(item, bool):
            raise InsertionError(f"at={at!r}: {item!r} is given twice; each site takes the block once (to chain two "
                                 f"blocks after one layer, name both: module=SE,CBAM at={item})")
        seen.append(item)
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise InsertionError(f"at={at!r}: {item!r} is not a site; allowed: {', '.join(SITES)} or layer indices")
        if isinstance(item, int):
            if not 0 <= item < last:
                raise InsertionError(
                    f"at={at!r}: layer {item} is out of range; the base has layers 0..{last} and a block can follow "
                    f"layers 0..{last - 1} (layer {last} is {rows[last][2]})"
                )
            out.add(item)
            names.append("layers")
        elif item == "backbone":
            out |= {t for i in range(nb, len(rows)) for t in row_targets(rows[i][0], i) if 0 <= t < nb}
            names.append(item)
        elif item == "sppf":
            out.add(nb - 1)
            names.append(item)
        elif item == "neck":
            out |= set(row_targets(rows[last][0], last))
            names.append(item)
        else:
            hint = did_you_mean(item, SITES, sentence=True)
            raise InsertionError(f"at={at!r}: unknown site {item!r}.{hint} Allowed: {', '.join(SITES)} or layer "
                                 "indices")
    return sorted(out), list(dict.fromkeys(names))
