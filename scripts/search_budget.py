"""The placement search within its budget, by simulation: the candidate rules on the same simulated searches.

For 8 and 12 arms (the baseline's seed noise shared by every arm; seed SD of Δ ``sd`` mAP50-95), every candidate of
``attn_yolo.search.simulate.CANDIDATES`` runs on the same draws within the default search's budget (6 rounds of every
arm and the baseline: 54 runs at 8 arms, 78 at 12), and the table gives, per case: how often an arm 2 seed-SDs better
is returned, how often the search ends in an answer at w ≤ 0.01 (an arm returned, or none better than the baseline
beyond ≤ 0.01), how often any verdict is false, the mean runs, the median bound at the stop (how much better than the
baseline any arm may be) and the median half-width of the leader's interval. Then the chosen rule at seed SDs of
0.002 and 0.006, and under unequal spreads (the pooled spread's assumption broken). BENCHMARKS.md section 20.

    python scripts/search_budget.py                    # 1,000 searches per row (about 2 min on 2 loaded cores)
    python scripts/search_budget.py searches=500
"""

from __future__ import annotations

import sys

import numpy as np

CHOSEN = "each vs baseline and best, pooled spread (chosen)"


def cases(arms: int, sd: float) -> list[tuple[str, list[float], np.ndarray | None]]:
    """(case, true Δ per arm, each arm's spread in units of ``sd`` or None)."""
    return [("one arm +2 SD", [2 * sd] + [0.0] * (arms - 1), None), ("every arm 0", [0.0] * arms, None)]


def rows(searches: int) -> list[tuple]:
    """(arms, seed SD, case, candidate, ``outcome``) for every row of the table, seeds fixed."""
    from attn_yolo.search.simulate import simulate

    out = []
    for arms in (8, 12):
        for i, (case, deltas, _) in enumerate(cases(arms, 0.004)):
            for name, r in simulate(deltas, 0.004, searches=searches, seed=10 * arms + i).items():
                out.append((arms, 0.004, case, name, r))
        for sd in (0.002, 0.006):
            for i, (case, deltas, _) in enumerate(cases(arms, sd)):
                r = simulate(deltas, sd, searches=searches, seed=10 * arms + i, candidates=[CHOSEN])[CHOSEN]
                out.append((arms, sd, case, CHOSEN, r))
        spreads = np.linspace(0.5, 1.5, arms)
        r = simulate([0.0] * arms, 0.004, searches=searches, seed=10 * arms + 2, candidates=[CHOSEN],
                     spreads=spreads)[CHOSEN]
        out.append((arms, 0.004, "every arm 0, spreads 0.5–1.5 × SD", CHOSEN, r))
    return out


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    n = int(args.get("searches", 1000))
    print(f"{n:,} simulated searches per row (fixed seeds); budget 6 rounds of every arm and the baseline "
          "(54 runs at 8 arms, 78 at 12); Δ in mAP50-95\n")
    print("| arms | seed SD of Δ | case | rule | arm returned | answer at w ≤ 0.01 | any false verdict | mean runs | "
          "bound at stop (median) | leader's half-width (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for arms, sd, case, name, r in rows(n):
        pct = (lambda x: "—" if x != x else f"{100 * x:.1f} %")  # noqa: E731  NaN: no single best arm
        bold = "**" if name == CHOSEN else ""
        print(f"| {arms} | {sd:.3f} | {case} | {bold}{name}{bold} | {pct(r['returned'])} | {pct(r['answered'])} | "
              f"{pct(r['any_false'])} | {r['runs']:.1f} | {r['bound']:+.4f} | ±{r['half']:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
