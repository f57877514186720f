"""Report: the attention-health table printed after training, gates.png, and the ablation summary's health section."""

from __future__ import annotations

import math
from pathlib import Path

from attn_yolo.files import atomic_write
from attn_yolo.health.flags import FLAGS, GAMMA_OFF, INPUT_EFFECT, KNOCKOUT_OFF, SATURATED_SHARE, UNIFORM_ENTROPY
from attn_yolo.health.gatescsv import CSV_NAME, read_csv
from attn_yolo.health.measure import SATURATION
from attn_yolo.markdown import Section, table
from attn_yolo.text import missing

PLOTTED = (("gate_mean", "gate mean"), ("saturated", "saturated share"), ("entropy", "entropy / ln N"),
           ("peak_share", "peak share"), ("gamma", "mean |γ|"), ("knockout", "knock-out effect"),
           ("mean_ablation", "mean-ablation effect"))


def _g(v, spec: str = ".3g") -> str:
    return "-" if missing(v) else format(v, spec)


def _pct(v) -> str:
    return "-" if missing(v) else f"{100 * v:.1f} %"


def last_epoch(rows: list[dict]) -> list[dict]:
    """The rows of the last epoch recorded."""
    if not rows:
        return []
    e = max(r["epoch"] for r in rows)
    return [r for r in rows if r["epoch"] == e]


def console_table(rows: list[dict], note: str = "") -> str:
    """The last epoch's health per block as a fixed-width table, flags last (``-`` for none)."""
    last = last_epoch(rows)
    head = ("block", "gate mean", "gate std", "saturated", "entropy", "peak", "|γ|", "knock-out", "mean-ablated",
            "flags")
    cells = [head] + [(r["name"], _g(r["gate_mean"], ".4f"), _g(r["gate_std"], ".4f"), _pct(r["saturated"]),
                       _g(r["entropy"], ".4f"), _g(r["peak_share"], ".3f"), _g(r["gamma"], ".3g"),
                       _g(r["knockout"], ".3g"), _g(r.get("mean_ablation", math.nan), ".3g"),
                       ", ".join(r["flags"]) or "-") for r in last]  # fmt: skip
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = [f"attention health after epoch {last[0]['epoch'] if last else 0}" + (f" ({note})" if note else "") + ":"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def thresholds() -> dict[str, tuple[float, str]]:
    """Per plotted measure, the flag threshold drawn on its panel (``attn_yolo.health.flags``) and its words."""
    from attn_yolo.health.flags import GAMMA_OFF, KNOCKOUT_OFF, ONE_HOT_SHARE, SATURATED_SHARE, UNIFORM_ENTROPY

    return {"entropy": (UNIFORM_ENTROPY, f"uniform at >= {UNIFORM_ENTROPY}"),
            "peak_share": (ONE_HOT_SHARE, f"one-hot at >= {ONE_HOT_SHARE}"),
            "saturated": (SATURATED_SHARE, f"saturated at >= {SATURATED_SHARE}"),
            "gamma": (GAMMA_OFF, f"switched off below {GAMMA_OFF:g}"),
            "knockout": (KNOCKOUT_OFF, f"switched off below {KNOCKOUT_OFF:g}")}  # fmt: skip


def gates_figure(rows: list[dict]):
    """The matplotlib Figure of ``gates.png``: one panel per measure (``PLOTTED``) against the epoch, one curve per
    block, each flag's threshold drawn (``thresholds``). The knock-out panel is logarithmic above ``KNOCKOUT_OFF``
    and linear below it (symlog), so that epoch 0's exact 0 (a block at the identity) is a point at 0, not a line
    falling off a log axis."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from attn_yolo.health.flags import KNOCKOUT_OFF

    names = list(dict.fromkeys(r["name"] for r in rows))
    fig = Figure(figsize=(17, 7), constrained_layout=True)
    axes = fig.subplots(2, 4)
    for ax in axes.ravel()[len(PLOTTED):]:
        ax.set_visible(False)
    lines = thresholds()
    for ax, (key, label) in zip(axes.ravel(), PLOTTED):
        for n in names:
            pts = [(r["epoch"], r[key]) for r in rows if r["name"] == n and not math.isnan(r.get(key, math.nan))]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, label=n)
        if key in lines:
            y, words = lines[key]
            ax.axhline(y, color="C3", ls=":", lw=1.2, label=f"flag: {words}")
            ax.legend(handles=[ax.get_lines()[-1]], fontsize=7, loc="best")
        ax.set_title(label)
        ax.set_xlabel("epoch (0: before training)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole epochs
        if key in ("knockout", "mean_ablation"):
            ax.set_yscale("symlog", linthresh=KNOCKOUT_OFF)
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    first = axes.ravel()[0]
    first.legend(fontsize=7)
    fig.suptitle("attention health per block (fixed validation images); dotted: a flag's threshold")
    return fig


def plot_gates(rows: list[dict], path: str | Path) -> Path:
    """Write ``gates.png`` (``gates_figure``)."""
    fig = gates_figure(rows)
    atomic_write(path, lambda p: fig.savefig(p, dpi=110, format=Path(path).suffix[1:] or "png"))
    return Path(path)


def _run_health(row: dict) -> tuple[list[dict], str]:
    """``(last-epoch rows, note)`` of one ablation run's record: its gates.csv, or why there is none."""
    csv_path = Path(row.get("run_dir") or "") / CSV_NAME
    if "non-finite attention" in str(row.get("error") or ""):  # NonFiniteAttentionError stopped the run
        return [], "non-finite"
    if not csv_path.is_file():
        return [], ""
    return last_epoch(read_csv(csv_path)), ""


def arm_health(rows: list[dict]) -> dict:
    """Mean last-epoch ``gamma``, ``knockout`` and ``entropy`` (normalised, 1 = flat) over the blocks of the runs
    ``rows`` (their ``gates.csv``), ``switched_off`` and ``uniform``: the shares of runs with a block flagged so,
    ``all_uniform``: the share with every block flagged uniform (none of the arm's gates depends on the input); NaN
    where nothing was measured."""
    vals: dict[str, list[float]] = {"gamma": [], "knockout": [], "entropy": []}
    flat = all_flat = 0
    off, runs = 0, 0
    for r in rows:
        last, _ = _run_health(r)
        if not last:
            continue
        runs += 1
        off += any("switched off" in b["flags"] for b in last)
        flat += any("uniform" in b["flags"] for b in last)
        all_flat += all("uniform" in b["flags"] for b in last)
        for k in vals:
            vals[k] += [b[k] for b in last if not math.isnan(b[k])]
    out = {k: (sum(v) / len(v) if v else math.nan) for k, v in vals.items()}
    share = (lambda k: k / runs) if runs else (lambda k: math.nan)
    return {**out, "switched_off": share(off), "uniform": share(flat), "all_uniform": share(all_flat),
            "runs": runs}


HEALTH_HEADERS = ("variant", "verdict", "block", "gate mean", "saturated", "entropy", "|γ|", "knock-out",
                  "mean ablation", "flags (seeds)")
HEALTH_FLAGS = (f"Flags: uniform (entropy / ln N >= {UNIFORM_ENTROPY}, and the gates held at their mean move the "
                f"detections' class probabilities by < {INPUT_EFFECT} (mean ablation): flat maps, a fixed rescale), "
                f"one-hot (half a map's mass in one cell), saturated (>= {SATURATED_SHARE * 100:g} % of gate values < "
                f"{SATURATION} or > {1 - SATURATION}), switched off (knock-out effect < {KNOCKOUT_OFF:g} or mean |γ| < "
                f"{GAMMA_OFF:g}: removing the block changes nothing), non-finite (NaN/inf). Whether the blocks "
                "mattered enough for a verdict is the attention check's (first section): an arm whose blocks stayed "
                "near the identity is not tested. Per run: `runs/<run>/gates.csv`, `gates.png`.")


def health_section(variants: list[str], rows: list[dict], verdicts: dict[str, str]) -> Section | None:
    """The ablation summary's "Attention health" section: per variant its verdict beside the health of each of its
    blocks at the last epoch, averaged over the seeds whose run folder has a ``gates.csv``; each flag with the share
    of seeds that raised it. None when no run measured any health.

    Args:
        variants: variant names in config order.
        rows: the runs' records (``variant``, ``seed``, ``status``, ``run_dir``, ``error``).
        verdicts: ``{variant: verdict vs the baseline}`` (``"baseline"`` for the baseline; absent: ``—``).
    """
    per, nonfinite = _health_by_variant(rows)
    if not per and not nonfinite:
        return None
    cells = []
    for v in variants:
        verdict = verdicts.get(v, "—")
        if v in nonfinite:
            blank = [""] * (len(HEALTH_HEADERS) - 4)  # the measured columns, empty
            cells.append([v, verdict, "(training stopped)", *blank, f"non-finite ({nonfinite[v]} runs)"])
        if v not in per and v not in nonfinite:
            cells.append([v, verdict, "no attention blocks", *[""] * (len(HEALTH_HEADERS) - 3)])
        cells += [[v, verdict, name, *_block_cells(bs)] for name, bs in per.get(v, {}).items()]
    return Section("Attention health (last epoch, fixed validation images; mean over seeds)",
                   [table(HEALTH_HEADERS, cells), "", HEALTH_FLAGS])


def _health_by_variant(rows: list[dict]) -> tuple[dict[str, dict[str, list[dict]]], dict[str, int]]:
    """``({variant: {block: [its last-epoch rows, one per seed]}}, {variant: runs stopped by non-finite
    attention})``."""
    per: dict[str, dict[str, list[dict]]] = {}
    nonfinite: dict[str, int] = {}
    for r in rows:
        last, note = _run_health(r)
        v = r["variant"]
        if note == "non-finite":
            nonfinite[v] = nonfinite.get(v, 0) + 1
        for b in last:
            per.setdefault(v, {}).setdefault(b["name"], []).append(b)
    return per, nonfinite


def _block_cells(bs: list[dict]) -> list[str]:
    """One block's cells, its seeds' means (gate mean, saturated, entropy, |γ|, knock-out, mean ablation) and flags
    (seeds)."""
    def mean(k):
        vals = [b[k] for b in bs if not math.isnan(b.get(k, math.nan))]
        return sum(vals) / len(vals) if vals else math.nan

    counts = {f: sum(f in b["flags"] for b in bs) for f in FLAGS}
    shown = ", ".join(f"{f} ({c}/{len(bs)})" for f, c in counts.items() if c) or "none"
    return [_g(mean("gate_mean"), ".3f"), _pct(mean("saturated")), _g(mean("entropy"), ".4f"), _g(mean("gamma")),
            _g(mean("knockout")), _g(mean("mean_ablation"), ".4f"), shown]
