"""The sites of a placement search: ``sites: auto`` enumerated from the base model, or given as ``insert``'s specs.

A site is one placement of a block, as ``attn-yolo insert`` takes it:

- ``backbone`` (after each backbone output the neck taps: P3, P4, P5), a layer index (``4``: after layer 4 alone;
  ``"4,6"``: after both), ``sppf`` (after the last backbone layer: SPPF, or C2PSA after it), ``neck`` (after each
  layer Detect reads);
- ``<CSP>:<at>``, inside the base's own CSP rows (``C3k2:neck`` puts the block X in every bottleneck of the neck's
  C3k2 rows as ``C3k2_<X>``; ``C2f:backbone`` in yolov8), ``at`` being ``backbone``, ``neck`` or row indices.

``sites: auto`` gives, in this order: ``backbone``; the P3 and P4 outputs one at a time (their layer indices);
``sppf`` (P5, after SPPF / C2PSA); ``neck``; ``<CSP>:backbone`` and ``<CSP>:neck`` for the base's CSP block (C2f in
yolov8, C3k2 in YOLO11 / YOLO26).
"""

from __future__ import annotations

import dataclasses

from attn_yolo.insertion import InsertionError
from attn_yolo.insertion.base import model_rows, row_targets
from attn_yolo.insertion.inner import rows as inner_rows
from attn_yolo.insertion.sites import resolve_sites

CSP_ROWS = ("C2f", "C3k2")  # the CSP blocks a block can go inside (``<CSP>_<X>``)


@dataclasses.dataclass(frozen=True)
class Site:
    """One placement: ``at`` as ``insert`` takes it, inside ``csp`` rows (``C3k2``) or after layers (None)."""

    at: str
    csp: str | None = None
    label: str = ""  # what it is, with the base's layers: "P3 output (after layer 4)"

    @property
    def spec(self) -> str:
        """As written in a config: ``4``, ``neck``, ``C3k2:neck``."""
        return f"{self.csp}:{self.at}" if self.csp else self.at

    @property
    def slug(self) -> str:
        """The site in an arm's name: ``4+6``, ``C3k2-neck``."""
        return self.spec.replace(":", "-").replace(",", "+").replace(" ", "")

    def module(self, block: str) -> str:
        """The module ``insert`` takes for ``block`` at this site: ``C3k2_CBAM`` inside, else ``CBAM``."""
        return f"{self.csp}_{block}" if self.csp else block


def layers(d: dict, site: Site) -> list[int]:
    """The base layers ``site`` touches: those a block follows, or the CSP rows it goes inside.

    Raises:
        InsertionError: the site does not exist in this base (its message names the site and what is allowed).
    """
    if site.csp:
        return inner_rows(d, f"{site.csp}_CBAM", site.at)[0]
    return resolve_sites(d, site.at)[0]


def auto_sites(d: dict) -> list[Site]:
    """``sites: auto`` for the base model dict ``d`` (module docstring: which, in what order)."""
    rows, nb = model_rows(d), len(d["backbone"])
    taps = sorted({t for i in range(nb, len(rows)) for t in row_targets(rows[i][0], i) if 0 <= t < nb})
    detect = sorted(row_targets(rows[-1][0], len(rows) - 1))
    out = [Site("backbone", None, f"backbone outputs P3/P4/P5 (after layers {', '.join(map(str, taps))})")]
    for level, t in zip(("P3", "P4"), taps[:-1]):
        out.append(Site(str(t), None, f"{level} output (after layer {t}, {rows[t][2]})"))
    out.append(Site("sppf", None, f"P5 output (after layer {nb - 1}, {rows[nb - 1][2]})"))
    out.append(Site("neck", None, f"inputs to Detect (after layers {', '.join(map(str, detect))})"))
    csp = next((c for c in CSP_ROWS if any(r[2] == c for r in rows)), None)
    if csp:
        for part, sel in (("backbone", range(nb)), ("neck", range(nb, len(rows) - 1))):
            idx = [i for i in sel if rows[i][2] == csp]
            if idx:
                out.append(Site(part, csp, f"inside the {part}'s {csp} rows ({', '.join(map(str, idx))})"))
    return out


def parse_site(d: dict, raw) -> Site:
    """One site as a config gives it (module docstring), checked against the base ``d``.

    Raises:
        InsertionError: not a site of this base (its message says what is allowed).
    """
    if isinstance(raw, bool) or not isinstance(raw, (str, int, list)):
        raise InsertionError(f"{raw!r} is not a site; allowed: backbone, sppf, neck, layer indices (4 or '4,6'), "
                             f"or inside CSP rows ({', '.join(c + ':neck' for c in CSP_ROWS)})")
    text = ",".join(map(str, raw)) if isinstance(raw, list) else str(raw).strip()
    csp, sep, at = text.partition(":")
    site = Site(at.strip(), csp.strip()) if sep else Site(text)
    if site.csp is not None and site.csp not in CSP_ROWS:
        raise InsertionError(f"{text!r}: {site.csp!r} is not a CSP block to go inside; allowed: "
                             f"{', '.join(CSP_ROWS)} (as C3k2:neck)")
    touched = layers(d, site)
    what = f"inside {site.csp} rows" if site.csp else "after layers"
    return dataclasses.replace(site, label=f"{what} {', '.join(map(str, touched))}")
