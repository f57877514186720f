"""The placement search's rule by simulation (``attn_yolo.search.rule.simulate``): searches of K arms with known
effects, the rule against a naive one (drop by point estimate, uncorrected t-intervals) on the same draws.

Rows: one arm 2 seed-SDs better than the rest (is it returned? settled?), every arm at Δ = 0 (any false better /
worse, or a drop below an arm that is not better), and a spread of effects; runs used against every arm to max.

    python scripts/search_sim.py                       # 1,000 searches of 12 arms per row, max 20 seeds (~10 s)
    python scripts/search_sim.py searches=5000 arms=8 max=12
"""

from __future__ import annotations

import sys


def rows(searches: int, arms: int, mx: int, sd: float = 1.0) -> list[tuple[str, dict]]:
    """(case, ``simulate``'s result) for each case of the table, seeds fixed."""
    from attn_yolo.search.rule import SearchRule, simulate

    rule = SearchRule(max=mx)
    cases = [("one arm +2 SD, the rest 0", [2 * sd] + [0.0] * (arms - 1)),
             ("every arm 0", [0.0] * arms),
             ("one arm +2 SD, the rest spread -2..+1 SD", [2 * sd] + [sd * (-2 + 3 * i / max(1, arms - 2))
                                                                    for i in range(arms - 1)])]
    return [(name, simulate(d, sd, rule, searches, seed=i)) for i, (name, d) in enumerate(cases)]


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    n, k, mx = int(args.get("searches", 1000)), int(args.get("arms", 12)), int(args.get("max", 20))
    table = rows(n, k, mx)
    r0 = table[0][1]
    print(f"{n:,} simulated searches per row, {k} arms, seeds {r0['min']}..{r0['max']} (min: the first with bounded "
          "joint intervals); naive: drop the arms below the median by point estimate each round, verdicts by "
          "uncorrected 95 % t-intervals\n")
    print("| case | best returned | settled | any false verdict | runs / full design | naive: best returned | "
          "naive: any false verdict |")
    print("|---|---|---|---|---|---|---|")
    for name, r in table:
        pct = (lambda x: "—" if x != x else f"{100 * x:.1f} %")  # noqa: E731  NaN: no single best arm
        print(f"| {name} | {pct(r['found'])} | {pct(r['settled'])} | {pct(r['any_false'])} | "
              f"{r['runs']:.0f} / {r['full_runs']} | {pct(r['naive_found'])} | {pct(r['naive_any_false'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
