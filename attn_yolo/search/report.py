"""The search's report step: the ranked table, why it stopped, placement.png and the best arm's YAML.

The ranked table goes to search.csv and summary.md with the guarantee, the layer diagram coloured by Δ to
placement.png, and the best arm's model YAML to best.yaml (with best.pt where a start was trained or given).
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
from pathlib import Path

from attn_yolo import markdown
from attn_yolo.ablate.runs import latency
from attn_yolo.ablate.statistics import comparisons
from attn_yolo.ablate.statistics.verdicts import NOT_TESTED, judge
from attn_yolo.files import atomic_write
from attn_yolo.search.rounds import decide
from attn_yolo.search.rule import DROPS, STOPS, guarantee
from attn_yolo.text import bracket, number

TABLE = ("rank", "arm", "block", "site", "delta", "lo", "hi", "verdict", "treatment", "seeds", "state", "params",
         "gflops", "latency_ms")
WHY = {"settled": "one arm is left, better than the baseline: settled as the best placement",
       "answered": "it answered at the requested precision (search.precision)",
       "max": "the arms left reached seeds.max", "budget": "the budget is spent", "running": "it was interrupted"}


def _latency(timing: dict | None, arm: str) -> float:
    """The arm's median batch-1 forward time (ms), timed after the runs apart from training
    (``attn_yolo.ablate.runs.latency``)."""
    return float((timing or {}).get("arms", {}).get(arm, {}).get("median_ms", math.nan))


def table(search, rows: list[dict], dec: dict) -> list[dict]:
    """One row per arm, ranked: arms still in first, then by Δ; each with its joint interval, verdict against the
    baseline, attention check, seeds, why it is out, and its cost."""
    ab, out = search.ab, []
    timing = latency.read(ab.out)
    sites = {a.name: (a.block, a.site.spec) for a in search.arms}
    names = search.arm_names
    for k, arm in enumerate(names):
        lo, hi, n, state = float(dec["lo"][k]), float(dec["hi"][k]), int(dec["n"][k]), int(dec["state"][k])
        v = next(x for x in ab.variants if x.name == arm)
        t = comparisons.treated(ab, rows, arm, {"lo": lo, "hi": hi, "n": n}) if n else {"status": "n/a"}
        status, words = judge(lo, hi, n, t)  # the ablation's one rule and word list (ablate.statistics.verdicts)
        verdict = NOT_TESTED if status == NOT_TESTED else words
        by = int(dec["by"][k])
        why = DROPS[state] if state != 2 else f"not the best (below {names[by]})"
        block, site = sites[arm] if arm in sites else ("Placebo", sites.get(ab.placebos.get(arm), ("", ""))[1])
        out.append({"arm": arm, "block": block, "site": site, "delta": float(dec["mean"][k]), "lo": lo, "hi": hi,
                    "verdict": verdict, "treatment": t["status"], "treatment_words": comparisons.not_tested(t)
                    if t["status"] == "failed" else t.get("why", ""), "seeds": n, "state": why, "params": v.params,
                    "gflops": v.gflops, "latency_ms": _latency(timing, arm)})  # fmt: skip
    out.sort(key=lambda r: (r["state"] != "in", -(r["delta"] if math.isfinite(r["delta"]) else -math.inf)))
    for i, r in enumerate(out, 1):
        r["rank"] = i
    return out


def best_arm(ranked: list[dict]) -> dict | None:
    """The search's best: the first arm still in that was tested (passed its attention check), else None."""
    return next((r for r in ranked if r["state"] == "in" and r["verdict"] != "not tested" and r["seeds"] >= 2
                 and math.isfinite(r["delta"]) and not r["arm"].endswith("-placebo")), None)


def returned_arm(ranked: list[dict], dec: dict) -> dict | None:
    """The arm the search returns: the leader (the first arm still in), when the rule's answer is an arm
    (``rule.ANSWERS``) and its attention check passed (``best_arm``); else None."""
    best = best_arm(ranked)
    lead = next((r for r in ranked if r["state"] == "in"), None)
    return best if int(dec.get("answer", 0)) == 1 and best is not None and best is lead else None


def answer_line(ranked: list[dict], dec: dict, precision: float | None = None) -> str:
    """The search's answer, from the rule's decision (``rule.ANSWERS``): the arm returned (better than the baseline,
    within ``gap`` of the best arm searched; settled when it is the only arm left), or none better than the baseline
    beyond the largest upper bound of the arms left (whatever stopped the search: the bound holds, ``precision`` said
    where it was not reached); an arm whose attention check failed is never returned."""
    answer, gap, bound = int(dec.get("answer", 0)), float(dec.get("gap", math.inf)), float(dec.get("bound", math.inf))
    best = returned_arm(ranked, dec)
    lead = next((r for r in ranked if r["state"] == "in"), None)
    if best is not None:
        within = ("settled: the only arm left" if dec.get("settled") else
                  f"no arm searched is better than it by more than {gap:.4f}")
        return (f"**Returned: {best['arm']}** ({best['block']} at {best['site']}): better than the baseline, "
                f"Δ mAP50-95 {number(best['delta'], sign=True, none='—')} {bracket(best['lo'], best['hi'])}; {within}")
    if answer == 1 and lead is not None:
        return (f"**No arm is returned**: the leader, {lead['arm']}, is better than the baseline "
                f"{bracket(lead['lo'], lead['hi'])} but its attention check did not pass (not tested)")
    if answer == 2 and math.isfinite(bound):
        early = dec.get("stop_reason", STOPS[int(dec.get("stop", 0))]) not in ("settled", "answered")
        return (f"**None better than the baseline beyond {max(bound, 0.0):+.4f}** mAP50-95: no arm searched, the "
                "dropped ones included, improves on it by more than that" + (
                    f"; stopped before the requested precision ({number(precision, none='—')}): a larger budget "
                    "narrows it" if early else ""))
    return "**No answer yet**: no look at the arms yet; a larger budget continues the search"


def _own_spread(dec: dict) -> str:
    """Each arm's own seed SD of Δ beside the pooled one (the pooling assumes them equal), or ''."""
    own = [x for x in dec.get("own_sd", []) if math.isfinite(x)]
    if len(own) < 2:
        return ""
    return (f"; each arm's own, {min(own):.4f} to {max(own):.4f} (the intervals assume one spread for every arm: "
            "a far wider one would make its verdicts optimistic)")


def summary(search, ranked: list[dict], dec: dict, used: int, wall_s: float) -> str:
    """summary.md: the guarantee, why it stopped and the runs used, the best arm, the ranked table."""
    ab, rule, k = search.ab, search.rule, len(search.arm_names)
    reason = dec.get("stop_reason", STOPS[int(dec["stop"])])
    full = (k + 1) * rule.max
    head = answer_line(ranked, dec, rule.precision)
    lines = [f"# Placement search: {ab.name}", "", guarantee(rule, k), "", head, "",
             f"- stopped: {WHY[reason]}" + (f" ({dec['budget']})" if dec.get("budget") else "")
             + f", after {int(dec['rounds'])} paired seeds",
             f"- runs: {used} of the full design's {full} (every arm and the baseline to seeds.max {rule.max}); "
             f"wall {wall_s / 60:.1f} min",
             f"- seeds: looks after {', '.join(map(str, rule.planned()))} paired seeds; the intervals cover the mean "
             "Δ over seeds on this validation set",
             f"- spread: the seed SD of Δ pooled over every arm, {number(float(dec.get('sd', math.nan)), none='—')} "
             f"({int(dec.get('df', 0))} degrees of freedom){_own_spread(dec)}",
             "- attention check: an arm whose blocks' attention did not matter to its model (their gates held at their "
             "mean changed mAP50-95 by less than the design resolves) is *not tested*, never "
             "worse", "", "## Ranked arms", "",
             markdown.table(["#", "arm", "block", "site", "Δ mAP50-95", "joint interval", "verdict vs baseline",
                             "treatment", "seeds", "state", "params", "GFLOPs", "latency ms"],
                             [[r["rank"], r["arm"], r["block"], r["site"], number(r["delta"], sign=True, none="—"),
                              bracket(r["lo"], r["hi"]),
                              r["verdict"], r["treatment"], r["seeds"], r["state"], r["params"] or "—",
                              number(r["gflops"], 2, none="—"), number(r["latency_ms"], 1, none="—")]
                             for r in ranked])]  # fmt: skip
    notes = [f"- {r['arm']}: {r['treatment_words']}" for r in ranked if r["treatment"] == "failed"]
    skipped = [f"- {arm}: {why}" for arm, why in search.unbuildable.items()]
    return "\n".join(lines + (["", "## Not tested", "", *notes] if notes else [])
                     + (["", "## Not searched (`sites: auto`: the block cannot be built there)", "", *skipped]
                        if skipped else [])) + "\n"


def write_best(search, best: dict | None) -> list[str]:
    """best.yaml (and best.pt, the start's weights carried, where the search has a start): the best arm's model,
    ready for ``attn-yolo train``; the files written."""
    from attn_yolo.insertion import main as insert_main

    out = search.ab.out
    if best is None:
        return []
    arm = next(a for a in search.arms if a.name == best["arm"])
    args = [f"base={search.model}", f"module={arm.site.module(arm.block)}", f"at={arm.site.at}", "overwrite=True",
            f"out={out / 'best.yaml'}"] + ([f"args={arm.args}".replace(" ", "")] if arm.args is not None else [])
    start = search.ab.start
    if start is not None and Path(start.weights).is_file():
        args += [f"pretrained={start.weights}", f"out_weights={out / 'best.pt'}", "identity=False"]
    with contextlib.redirect_stdout(io.StringIO()) as said:
        insert_main(args)
    (out / "best.txt").write_text(said.getvalue())
    return ["best.yaml"] + (["best.pt"] if (out / "best.pt").is_file() and start is not None else [])


def write_table(path: Path, ranked: list[dict]) -> None:
    def write(p):
        with open(p, "w", newline="") as f:
            w = csv.DictWriter(f, TABLE, extrasaction="ignore")
            w.writeheader()
            w.writerows(ranked)

    atomic_write(path, write)


def search_report(search):
    """``report(session, wall_s)`` for ``run_ablation``: writes the outputs; returns (terminal text, where)."""
    from attn_yolo.search.plot import plot_placement

    def report(s, wall_s: float) -> tuple[str, str]:
        rows = s.current()
        dec = getattr(search, "result", None) or decide(search, rows)
        ranked = table(search, rows, dec)
        text = summary(search, ranked, dec, len(rows), wall_s)
        out = search.ab.out
        atomic_write(out / "summary.md", lambda p: Path(p).write_text(text))
        write_table(out / "search.csv", ranked)
        plot_placement(out / "placement.png", search, ranked)
        try:  # the table stands without the winner's files
            best = write_best(search, returned_arm(ranked, dec))
        except Exception as e:  # noqa: BLE001  e.g. a start checkpoint deleted since the runs
            best = []
            print(f"attn-yolo search: warning: best.yaml not written: {type(e).__name__}: {e}")
        files = ["summary.md", "search.csv", "results.csv", "placement.png", *best]
        return "\n" + text, f"attn-yolo search: results in {out} ({', '.join(files)})"

    return report
