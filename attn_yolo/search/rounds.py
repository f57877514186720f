"""The search's execute step: paired seeds in rounds, the rule replayed from the records after each.

Rounds go through the ablation's scheduler; after each, the rule is replayed from the records
(``attn_yolo.search.rule.replay``), until it stops or the budget (runs, minutes) is spent.

A round runs the next paired seed of the baseline and of every arm still in (the first brings them to ``min``).
Seeds whose baseline run failed are skipped (no arm pairs with them); an arm whose run failed is out, reported
``failed``. Finished runs count without running again, so a rerun with a larger budget continues where the last
stopped, taking the same decisions.
"""

from __future__ import annotations

import math
import time

import numpy as np

from attn_yolo.search.rule import STOPS, replay


def paired(search, rows: list[dict]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Per-seed Δ mAP50-95 (1, K, N) of the arms against the baseline on the seeds the baseline finished (NaN: not
    run yet), the arms whose run failed (1, K), and those seeds."""
    ab, names = search.ab, search.arm_names
    by = {(r["variant"], r["seed"]): r for r in rows}
    seeds = [s for s in ab.seeds if by.get((ab.baseline, s), {}).get("status") == "ok"]
    d = np.full((1, len(names), len(seeds)), np.nan)
    failed = np.zeros((1, len(names)), bool)
    for k, arm in enumerate(names):
        for j, s in enumerate(seeds):
            r = by.get((arm, s))
            if r and r["status"] == "ok":
                d[0, k, j] = r["map50_95"] - by[(ab.baseline, s)]["map50_95"]
            elif r:
                failed[0, k] = True
    return d, failed, seeds


def decide(search, rows: list[dict]) -> dict:
    """The rule on the records so far: ``replay``'s result for the one search, with ``seeds`` (the paired seeds) and
    ``own_sd`` (K,: each arm's own seed SD of Δ over the seeds it used, NaN below 2: the pooled spread's check)."""
    d, failed, seeds = paired(search, rows)
    r = replay(d, search.rule, failed)
    n = r["n"][0]
    own = [float(np.std(d[0, k, :m], ddof=1)) if m >= 2 else float("nan") for k, m in enumerate(n)]
    return {**{k: (v[0] if isinstance(v, np.ndarray) else v) for k, v in r.items()}, "seeds": seeds,
            "stop_reason": STOPS[int(r["stop"][0])], "own_sd": own}


def next_batch(search, s, dec: dict) -> list:
    """The runs of the next round: the baseline's and every arm's still in, up to ``max(min, rounds + 1)`` paired
    seeds, skipping seeds whose baseline run failed; [] when no seed is left."""
    ab, rows = search.ab, s.rows
    want = max(search.rule.min, int(dec["rounds"]) + 1)
    going = {a for a, st in zip(search.arm_names, dec["state"]) if st == 0}
    batch, paired_seeds = [], 0
    have = {(x["variant"], x["seed"]) for x in s.current()}
    for seed in ab.seeds:
        base = rows.get((ab.baseline, seed))
        if base and base["status"] != "ok" and base["fingerprint"] == s.planned[(ab.baseline, seed)].fingerprint:
            continue  # a failed baseline seed pairs with nothing
        paired_seeds += 1
        if paired_seeds > want:
            break
        for arm in [ab.baseline, *search.arm_names]:
            key = (arm, seed)
            if (arm == ab.baseline or arm in going) and key not in have:
                batch.append(s.planned[key])
    return batch


def search_rounds(search, started: float | None = None):
    """``rounds(session)`` for ``attn_yolo.ablate.runs.runner.run_ablation``: the search's rounds (module docstring),
    its ``minutes`` counted from ``started`` (``time.perf_counter()``; default: now). Sets ``search.result`` (the last
    decision, with ``stop_reason`` ``budget`` where the budget stopped it)."""
    t0 = time.perf_counter() if started is None else started
    pace = []  # this session's rounds: (runs, wall seconds)

    def rounds(s) -> None:
        while True:
            dec = decide(search, s.current())
            search.result = dec
            if dec["stop"] != 0:
                return
            batch = next_batch(search, s, dec)
            used = len(s.current())
            why = budget_left(search, used, len(batch), time.perf_counter() - t0, pace)
            if not batch or why:
                dec["stop_reason"] = "budget" if why else "max"
                dec["budget"] = why or f"no seed left of {len(search.ab.seeds)}"
                return
            going = sum(st == 0 for st in dec["state"])
            s.progress.line(f"attn-yolo search: round to {max(search.rule.min, int(dec['rounds']) + 1)} paired "
                            f"seeds: {going} of {len(search.arm_names)} arms still in; {len(batch)} run(s)")
            started = time.perf_counter()
            s.schedule(batch)
            pace.append((len(batch), time.perf_counter() - started))

    return rounds


def budget_left(search, used: int, batch: int, elapsed_s: float, pace: list[tuple[int, float]] = ()) -> str:
    """Why the budget stops the search before a round of ``batch`` runs ('' : it does not). ``minutes``: a round is
    begun only when it is expected to end within them, at this session's pace so far (``pace``: the runs and wall
    seconds of each round it ran; none yet: begun while any minute is left); a round begun is finished."""
    if search.max_runs is not None and used + batch > search.max_runs:
        return f"max_runs {search.max_runs}: {used} run(s) used, the next round needs {batch}"
    if search.minutes is None:
        return ""
    runs, seconds = sum(n for n, _ in pace), sum(t for _, t in pace)
    expected = batch * seconds / runs if runs else 0.0
    if elapsed_s / 60 >= search.minutes:
        return f"minutes {search.minutes:g}: {math.floor(elapsed_s / 60)} min spent"
    if (elapsed_s + expected) / 60 > search.minutes:
        return (f"minutes {search.minutes:g}: {elapsed_s / 60:.1f} min spent, and the next round of {batch} run(s) "
                f"would take about {expected / 60:.1f} min at this session's pace")
    return ""
