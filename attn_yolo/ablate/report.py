"""The ablation report: summary.md (setup, verdicts, tables) and the plots ablation.png and curves.png."""

from __future__ import annotations

import math
from pathlib import Path

from attn_yolo.ablate.config import Ablation
from attn_yolo.ablate.records import epoch_table
from attn_yolo.ablate.stats import CONFIDENCE, METRICS, PRIMARY, summarize


def _fmt(x, dec: int, sign: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.{dec}f}" if sign else f"{x:.{dec}f}"


def duration(s: float) -> str:
    """Seconds as ``1m05s`` (or ``2h03m`` from an hour on), for the summary and the ETA."""
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def summary_markdown(ab: Ablation, rows: list[dict], stats: dict, wall_s: float | None = None) -> str:
    """The summary.md text: setup, verdicts, per-variant table (mean ± std), paired differences, failures."""
    names = [v.name for v in ab.variants]
    tr = ", ".join(f"{k}={v}" for k, v in ab.train.items())
    n_ok = sum(r["status"] == "ok" for r in rows)
    lines = [
        f"# Ablation `{ab.name}`",
        "",
        f"- data: `{ab.data}` ({ab.nc} classes); seeds: {', '.join(map(str, ab.seeds))}; baseline: `{ab.baseline}`",
        f"- train: {tr or 'Ultralytics defaults'}; GFLOPs and latency at imgsz {ab.imgsz}",
        f"- runs: {n_ok} ok, {len(rows) - n_ok} failed, {len(names) * len(ab.seeds) - len(rows)} not run"
        + (f"; wall time {duration(wall_s)} (this invocation)" if wall_s is not None else "")
        + f"; training time, sum over runs: {duration(sum(r['train_time_s'] or 0 for r in rows))}",
        "",
        f"## Verdict: mAP50-95 vs `{ab.baseline}`",
        "",
    ]
    for v in names:
        if v == ab.baseline:
            continue
        d = stats["diffs"][v][PRIMARY]
        b, s = stats["variants"][ab.baseline], stats["variants"][v]
        if d["n"] < 2:
            mean = f" (Δ {_fmt(d['mean'], 4, True)} from 1 seed)" if d["n"] == 1 else ""
            lines.append(f"- **{v}**: **n/a**: {d['n']} seed(s) with ok runs of both, needs >= 2{mean}")
            continue
        cost = []
        if b["params"] and s["params"]:
            cost.append(f"params {100 * (s['params'] / b['params'] - 1):+.2f}%")
        if b["gflops"] and s["gflops"]:
            cost.append(f"GFLOPs {100 * (s['gflops'] / b['gflops'] - 1):+.2f}%")
        if not math.isnan(b["latency_ms"][0]) and not math.isnan(s["latency_ms"][0]):
            cost.append(f"latency {s['latency_ms'][0] - b['latency_ms'][0]:+.2f} ms")
        lines.append(
            f"- **{v}**: **{d['verdict']}** (Δ {_fmt(d['mean'], 4, True)}, {int(CONFIDENCE * 100)}% CI "
            f"[{_fmt(d['lo'], 4, True)}, {_fmt(d['hi'], 4, True)}], p = {_fmt(d['p'], 3)}, n = {d['n']} paired seeds)"
            + (f"; cost: {', '.join(cost)}" if cost else "")
        )
    head = ["variant", "ok runs", "params (M)", "GFLOPs"] + [label for _, label, _, _ in METRICS]
    lines += ["", "## Results (mean ± std over seeds)", "", "| " + " | ".join(head) + " |",
              "|" + "---|" * len(head)]  # fmt: skip
    for v in names:
        s = stats["variants"][v]
        label = f"{v} (baseline)" if v == ab.baseline and "baseline" not in v.lower() else v
        cells = [label, f"{s['n']}/{len(ab.seeds)}",
                 _fmt(s["params"] / 1e6 if s["params"] else None, 3), _fmt(s["gflops"], 3)]  # fmt: skip
        for key, _, dec, _ in METRICS:
            mean, sd = s[key]
            cells.append(_fmt(mean, dec) + ("" if math.isnan(sd) else f" ± {_fmt(sd, dec)}"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"## Difference to `{ab.baseline}` (paired by seed; {int(CONFIDENCE * 100)}% CI from the t distribution, "
        "two-sided paired t-test)",
        "",
        "| variant | metric | Δ mean | 95% CI | p | n | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in names:
        if v == ab.baseline:
            continue
        for key, label, dec, _ in METRICS:
            if key not in stats["diffs"][v]:
                continue
            d = stats["diffs"][v][key]
            if d["n"] == 0:
                continue
            ci = "n/a" if math.isnan(d["lo"]) else f"[{_fmt(d['lo'], dec, True)}, {_fmt(d['hi'], dec, True)}]"
            lines.append(f"| {v} | {label} | {_fmt(d['mean'], dec, True)} | {ci} | {_fmt(d['p'], 3)} | {d['n']} | "
                         f"{d['verdict']} |")
    lines += ["", "Verdict: the CI excludes 0 → better/worse (latency: lower is better); otherwise no detectable "
              "difference. Δ = variant − baseline, per seed. Latency: median batch-1 forward of best.pt "
              "(fused, fp32)."]
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        lines += ["", "## Failed runs", "", "| variant | seed | error | run folder |", "|---|---|---|---|"]
        lines += [f"| {r['variant']} | {r['seed']} | {r['error'].replace('|', '/')} | `{r['run_dir']}` |"
                  for r in failed]
    lines += ["", "Plots: `ablation.png` (mAP50-95 vs GFLOPs), `curves.png` (validation mAP per epoch); every run: "
              "`results.csv`.", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------- plots


def plot_ablation(path: Path, stats: dict, names: list[str], baseline: str, imgsz: int):
    """mAP50-95 (mean ± std over seeds) against GFLOPs, one point per variant; returns the matplotlib Figure.

    The GFLOPs axis starts at 0, so a cost difference shows at its true proportion (an attention block adding 0.04 %
    does not look like a gap), and the mAP axis stays within [0, 1].
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5), dpi=120)
    ax = fig.subplots()
    if stats["variants"][baseline]["n"]:
        ax.axhline(stats["variants"][baseline][PRIMARY][0], color="C0", ls="--", lw=0.8, alpha=0.6)
    gflops = []
    for i, v in enumerate(names):
        s = stats["variants"][v]
        mean, sd = s[PRIMARY]
        if s["n"] == 0 or s["gflops"] is None:
            continue
        gflops.append(s["gflops"])
        ax.errorbar(s["gflops"], mean, yerr=0 if math.isnan(sd) else sd, fmt="s" if v == baseline else "o",
                    ms=8, capsize=5, color=f"C{i % 10}", label=f"{v} (n={s['n']})")
        ax.annotate(v, (s["gflops"], mean), textcoords="offset points", xytext=(7, 7 + 10 * (i % 3)), fontsize=9)
    ax.set_xlabel(f"GFLOPs at imgsz {imgsz}")
    ax.set_ylabel("mAP50-95 (val), mean ± std over seeds")
    ax.set_title("Ablation: accuracy vs cost")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.margins(x=0.15, y=0.15)
    if gflops:
        ax.set_xlim(0, 1.2 * max(gflops))
    ax.ticklabel_format(axis="x", useOffset=False)
    lo, hi = ax.get_ylim()
    ax.set_ylim(max(0.0, lo), min(1.0, hi))
    fig.tight_layout()
    fig.savefig(path)
    return fig


def plot_curves(path: Path, rows: list[dict], names: list[str]) -> None:
    """Validation mAP50 and mAP50-95 per epoch: every seed thin, the mean over seeds thick, one colour per variant."""
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(12, 4.5), dpi=120)
    axes = fig.subplots(1, 2)
    for ax, (col, label) in zip(axes, (("metrics/mAP50(B)", "mAP50"), ("metrics/mAP50-95(B)", "mAP50-95"))):
        for i, v in enumerate(names):
            curves = []
            for r in rows:
                if r["variant"] == v and r["status"] == "ok":
                    t = epoch_table(Path(r["run_dir"]) / "results.csv")
                    if t.get(col):
                        curves.append(np.array(t[col]))
                        ax.plot(t["epoch"], t[col], ".-", color=f"C{i % 10}", lw=0.8, ms=3, alpha=0.35)
            if curves:
                n = max(map(len, curves))
                m = np.array([np.nanmean([c[e] for c in curves if len(c) > e]) for e in range(n)])
                ax.plot(np.arange(1, n + 1), m, "o-", color=f"C{i % 10}", lw=2.2, ms=4,
                        label=f"{v} (mean of {len(curves)})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"{label} (val)")
        ax.set_title(f"Validation {label} per epoch")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def write_report(ab: Ablation, rows: list[dict], wall_s: float | None = None) -> str:
    """Write summary.md, ablation.png and curves.png from the planned runs' rows; returns the summary text."""
    names = [v.name for v in ab.variants]
    stats = summarize(rows, names, ab.baseline)
    text = summary_markdown(ab, rows, stats, wall_s)
    (ab.out / "summary.md").write_text(text)
    if any(r["status"] == "ok" for r in rows):
        plot_ablation(ab.out / "ablation.png", stats, names, ab.baseline, ab.imgsz)
        plot_curves(ab.out / "curves.png", rows, names)
    return text
