"""Joint verdicts by simulation: the rate of ablations with any false verdict, joint (Bonferroni split of α over the K
comparisons) against uncorrected (each at 95 %), with every arm stopping on its own (``sequential.simulate_family``),
and the power at a real effect, for K = 1, 2, 5, 10.

    python scripts/joint_verdicts.py                 # 2,000 simulated ablations per row, seed SD of Δ 0.008 (~5 s)
    python scripts/joint_verdicts.py experiments=10000 sd=0.01
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from attn_yolo.ablate.statistics.sequential import SeedRule, simulate_family

    args = dict(a.split("=", 1) for a in argv)
    e, sd = int(args.get("experiments", 2000)), float(args.get("sd", 0.008))
    rules = (SeedRule(min=3, max=20), SeedRule(min=3, max=5))
    print(f"{e:,} simulated ablations per row; per-seed Δ SD {sd}; each arm stops when its interval excludes 0, or at "
          "max; power: one arm at Δ = 2 SD, the others at 0\n")
    print("| seeds (min–max) | K | any false verdict, joint | uncorrected | power at Δ = 2 SD, joint | uncorrected "
          "| runs / full |")
    print("|---|---|---|---|---|---|---|")
    for rule in rules:
        for k in (1, 2, 5, 10):
            null = [0.0] * k
            real = [0.0] * (k - 1) + [2 * sd]
            j, u = (simulate_family(rule, null, sd, e, seed=1, joint=x) for x in (True, False))
            pj, pu = (simulate_family(rule, real, sd, e, seed=2, joint=x) for x in (True, False))
            print(f"| {rule.min}–{rule.max} | {k} | {100 * j['any_false']:.1f} % | {100 * u['any_false']:.1f} % | "
                  f"{100 * pj['power'][k - 1]:.1f} % | {100 * pu['power'][k - 1]:.1f} % | "
                  f"{pj['runs']:.1f} / {pj['full_runs']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
