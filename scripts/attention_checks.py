"""The attention check of every arm of a finished ablation, one table row per arm, read from its ``verdicts.json``.

Nothing is measured again: the figures are the ablation's own (``attn_yolo.ablate.statistics.treatment``), as its
summary states them in words. Per arm: A (mean over seeds of |Δ mAP50-95| with its new blocks' gates held at their
mean), the identity's and the re-initialised blocks' effects, the gates' normalised entropy (1 = flat), the share of
seeds with a block flagged ``uniform``, mean |γ|, Δ mAP50-95 against the baseline, the resolution (half-width of the
interval that decides the arm) and the check's result. Used for BENCHMARKS.md section 12.3.

    python scripts/attention_checks.py runs/study/int8/ablation
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEADERS = ("arm", "A: mean ablation", "identity", "re-initialised", "gate entropy", "uniform seeds", "mean \\|γ\\|",
           "Δ mAP50-95", "resolution", "check")


def rows(verdicts: dict) -> list[tuple]:
    """One row per arm that adds blocks (``HEADERS``), from ``read_verdicts``' verdicts."""
    from attn_yolo.text import number

    out = []
    for arm, v in verdicts.items():
        t = v.check or {}
        if "A" not in t:
            continue
        h = t.get("health", {})
        uniform = h.get("uniform")
        out.append((arm, number(t["A"]), number(t.get("knockout")), number(t.get("reinit")),
                    number(h.get("entropy"), 3), "n/a" if uniform is None else f"{100 * uniform:.0f} %",
                    number(h.get("gamma"), 3), number(v.mean, sign=True), f"±{number(t.get('resolution'))}",
                    t.get("status", "n/a")))
    return out


def main(argv: list[str]) -> int:
    from attn_yolo.ablate.statistics.verdicts import read_verdicts
    from attn_yolo.markdown import table

    usage = "usage: python scripts/attention_checks.py <ablation out folder>"
    if argv in (["-h"], ["--help"], ["help"]):
        print(usage)
        return 0
    if len(argv) != 1:
        print(usage, file=sys.stderr)
        return 2
    if not Path(argv[0]).is_dir():
        print(f"attention_checks: {argv[0]}: no such folder (an ablation's out folder)", file=sys.stderr)
        return 2
    found = read_verdicts(Path(argv[0]) / "verdicts.json")
    if found is None:
        print(f"attention_checks: {Path(argv[0]) / 'verdicts.json'}: no readable verdicts (has the ablation's "
              "report been written?)", file=sys.stderr)
        return 2
    got = rows(found[0])
    if not got:
        print(f"attention_checks: {argv[0]}: no arm with attention-check figures (no arm adds blocks, or none was "
              "compared)", file=sys.stderr)
        return 0
    print(table(HEADERS, got))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
