"""``attn-yolo search``: which block, where: a placement search over blocks × sites that drops arms by the data.

    attn-yolo search [config.yaml] [key=value ...]     # no config: the embedded default (synthetic data, ~20 min)

The config is an ablation config (``attn-yolo ablate help``: data, train, start, new_blocks, treatment, devices,
backend, out, latency, ...) whose arms come from its ``search:`` section instead of ``variants``::

    search:
      model: yolo11n.yaml              # the base: the baseline arm, and where every block is inserted
      blocks: [CBAM, {module: SE, args: [16]}]   # any names `attn-yolo modules` lists, with their args
      sites: auto                      # or [backbone, 4, sppf, neck, "C3k2:neck"] (attn_yolo.search.sites)
      seeds: {min: 3, max: 8, looks: [3, 4, 6, 8]}   # paired seeds per arm; the looks at which arms are dropped
      precision: 0.003                 # the answer's resolution w (mAP50-95); None: only a settled arm stops
      max_runs: 54                     # budget: training runs at most, over all sessions (optional)
      minutes: 60                      # budget: wall minutes of this session (optional)
      placebo: false                   # true: a Placebo arm at each arm's sites (attn_yolo.nn.placebo)

Every arm is the base with one block at one site, warm-started from the shared ``start`` as in an ablation, so the
attention check applies (an arm whose blocks did not matter is *not tested*). Paired seeds run in rounds; at each
look an arm is dropped below the baseline or below the leader on the seeds' pooled spread, and the search answers:
an arm returned (better than the baseline, within w of the best), or none better than the baseline beyond a bound
(``attn_yolo.search.rule``: the verdicts hold jointly over all arms searched, whatever stopped the search).
Outputs in ``out``: summary.md, search.csv (the ranked table), results.csv (every run), placement.png, best.yaml
(+ best.pt with a start) for ``attn-yolo train``. Command
line overrides as for ``ablate`` (``epochs=1``, ``out=...``); ``search.<key>=`` sets a search key. Rerun the same
command to continue (a larger budget continues the same search); SIGINT / SIGTERM keep finished runs.
"""

from __future__ import annotations

import time

from attn_yolo.ablate.config.ablation import ConfigError, apply_overrides, from_command_line
from attn_yolo.ablate.runs.rerun import split_flags
from attn_yolo.ablate.runs.train import execute_run
from attn_yolo.args import UsageError


def run(config=None, overrides: list[str] = (), runner=execute_run) -> int:
    """Load, override, validate (every problem at once, before any training) and run a search."""
    from attn_yolo.ablate.runs.runner import run_ablation
    from attn_yolo.search.config import load, validate
    from attn_yolo.search.report import search_report
    from attn_yolo.search.rounds import search_rounds

    started = time.perf_counter()
    overrides, flags = split_flags(list(overrides))
    raw, base, name, source = load(config)
    raw = apply_overrides(raw, overrides, "search")
    try:
        search = validate(raw, base, name, source)
    except ConfigError as e:
        raise ConfigError(source, from_command_line(e.problems, overrides, ("search",))) from None
    deadline = None if search.minutes is None else started + 60 * search.minutes
    return run_ablation(search.ab, runner=runner, started=started, rounds=search_rounds(search, started),
                        report=search_report(search), lines=plan_lines(search), budget=(deadline, search.max_runs),
                        **flags)


def plan_lines(search):
    """The search's plan printout (``lines`` for ``run_ablation``): arms, seeds, budget, design, out."""
    from attn_yolo.ablate.runs.runner import describe

    def lines(ab, n_todo: int) -> list[str]:
        k, rule = len(search.arm_names), search.rule
        placebos = ", each with a placebo arm" if k > len(search.arms) else ""
        budget = ", ".join(x for x in (f"max_runs {search.max_runs}" if search.max_runs else "",
                                       f"{search.minutes:g} minutes" if search.minutes else "") if x) or "none"
        blocks = (len(search.arms) + len(search.unbuildable)) // len(search.sites)
        return [f"attn-yolo search: {ab.name}: {k} arm(s) ({blocks} block(s) × "
                f"{len(search.sites)} site(s){placebos}) against the baseline; paired seeds {rule.min} to {rule.max} "
                f"in rounds, at most {(k + 1) * rule.max} runs ({n_todo} not yet run); budget: {budget}",
                *(f"attn-yolo search: not searched ({arm}): the block cannot be built there: {why}"
                  for arm, why in search.unbuildable.items()),
                *describe(ab, n_todo)[1:]]

    return lines


def main(argv: list[str]) -> int:
    """``attn-yolo search [config.yaml] [key=value ...]``."""
    from attn_yolo.ablate import config_main

    return config_main(argv, __doc__, run)


__all__ = ["UsageError", "main", "run"]
