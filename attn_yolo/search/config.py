"""The search config: a ``search:`` section over an ablation config, checked and turned into an ablation.

The section names the base model, blocks, sites, seeds and budget; it is checked at once with the ablation
config's other keys, and the ablation's arms are the blocks × sites (``validate``).

The embedded default (``attn-yolo search`` without a config) searches 2 blocks × 4 sites of yolo11n on the embedded
synthetic data, warm-started like the default ablation, within 20 minutes on 2 CPU cores.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import yaml

from attn_yolo.ablate.config.ablation import ConfigError, first_line
from attn_yolo.ablate.statistics.sequential import SEED_RULE, seed_rule_problems
from attn_yolo.args import Key, Schema
from attn_yolo.search.rule import SearchRule
from attn_yolo.search.sites import Site, auto_sites, parse_site
from attn_yolo.text import did_you_mean

DEFAULT_NAME = "synthetic-search"
DEFAULT_YAML = """\
# Default placement search: which of CBAM and ECA, at which of 4 sites, helps yolo11n on the synthetic shapes?
# `attn-yolo search` (no config) runs exactly this (embedded in attn_yolo/search/config.py). yolo11n is trained once
# (the shared start in out/start/); every arm, the start with one block inserted at one site (γ = 0.3, as the
# default ablation), is fine-tuned from it for 1 epoch, paired seed by paired seed; arms are dropped against the
# baseline and the leader on the seeds' pooled spread. Budget: 54 runs (6 rounds of the 9) or 18 minutes, whichever
# comes first: about 20 minutes on 2 CPU cores (BENCHMARKS.md section 16).
data: synthetic
search:
  model: yolo11n.yaml
  blocks: [CBAM, ECA]
  sites: [backbone, sppf, neck, "C3k2:neck"]
  seeds: {min: 3, max: 8, looks: [3, 4, 6, 8]}
  precision: 0.003
  max_runs: 54
  minutes: 18
start: {epochs: 5, fraction: 1.0, lr0: 0.003, warmup_epochs: 0.3, val: false}
new_blocks: {lr_mult: 1.0, gamma: 0.3}
devices: [cpu, cpu]
train: {epochs: 1, fraction: 0.5, imgsz: 128, batch: 8, nbs: 8, optimizer: AdamW, lr0: 0.0005, warmup_epochs: 0,
        mosaic: 0.0, close_mosaic: 0, scale: 0.0, translate: 0.0, hsv_h: 0.0, hsv_s: 0.0, hsv_v: 0.0, val: false,
        plots: false}
out: runs/search/synthetic-search
latency: {repeats: 20, warmup: 5}
"""
SEEDS = Schema([SEED_RULE[k] for k in ("min", "max", "spending", "looks")])  # search.seeds: the seed rule's keys
SEARCH = Schema([  # the search section's keys; model, blocks and sites are checked by their functions (_blocks, ...)
    Key("model", "any", "yolo11n.yaml", "the model YAML every arm inserts a block into"),
    Key("blocks", "any", None, "block names (CBAM) or {module, args}"),
    Key("sites", "any", "auto", "auto or a list of sites (backbone, sppf, neck, 4, '4,6', C3k2:neck)"),
    Key("seeds", "section", help="the seed rule (sequential.seed_rule_problems)", schema=SEEDS),
    Key("precision", "float", None, "the answer's resolution w, mAP50-95 (default 0.003)", low=0, low_open=True,
        note="(the answer's resolution w, mAP50-95)"),
    Key("confidence", "float", 0.95, "the intervals' confidence", low=0, high=1, low_open=True, high_open=True),
    Key("max_runs", "int", None, "training runs at most", low=1, note="(training runs at most)"),
    Key("minutes", "float", None, "wall minutes of this session at most", low=0, low_open=True,
        note="(wall minutes of this session)"),
    Key("placebo", "bool", False, "a Placebo arm per arm", words="true or false (a Placebo arm per arm)"),
])
"""The ``search:`` section's keys declared once (``check_section`` checks them by ``SEARCH.check`` first)."""
NOT_IN_A_SEARCH = ("variants", "seeds", "reference", "placebo")  # set by the search section
BASELINE = "baseline"
DESIGN = "search: each arm against the baseline and the best, pooled spread"  # recorded as seeds.design


@dataclasses.dataclass
class Arm:
    """One block at one site."""

    name: str
    block: str
    args: list | None
    site: Site


@dataclasses.dataclass
class Search:
    """A validated search: its ablation (``ab``: the baseline and every arm), the arms, the rule and the budget."""

    ab: object  # attn_yolo.ablate.config.ablation.Ablation
    model: str
    arms: list[Arm]
    rule: SearchRule
    sites: list[Site]
    max_runs: int | None = None
    minutes: float | None = None
    unbuildable: dict[str, str] = dataclasses.field(default_factory=dict)  # auto sites: arm -> why it cannot be built

    @property
    def arm_names(self) -> list[str]:
        """Every arm of the family: the block × site arms, then their placebos."""
        return [v.name for v in self.ab.variants if v.name != self.ab.baseline]


def _blocks(raw) -> tuple[list[tuple[str, list | None]], list[str]]:
    """``search.blocks``: names or ``{module, args}``, each a block ``attn-yolo modules`` lists."""
    from attn_yolo.insertion import module_class
    from attn_yolo.registry import MODULES

    if not isinstance(raw, list) or not raw:
        return [], ["search.blocks: expected a non-empty list of block names (CBAM) or {module: CBAM, args: [16, 7]}"]
    out, problems = [], []
    for i, b in enumerate(raw):
        name, args = (b.get("module"), b.get("args")) if isinstance(b, dict) else (b, None)
        if isinstance(b, dict) and (extra := set(b) - {"module", "args"}):
            problems.append(f"search.blocks[{i}]: unknown key(s) {', '.join(sorted(extra))}; allowed: module, args")
        if args is not None and not isinstance(args, list):
            problems.append(f"search.blocks[{i}].args: {args!r}; expected a list of hyperparameters")
        try:
            out.append((module_class(str(name))[0], args))
        except Exception:  # noqa: BLE001  an unknown name: said with the closest
            hint = did_you_mean(name, MODULES, cutoff=0.5)
            problems.append(f"search.blocks[{i}]: unknown block {name!r}{hint}; one of {', '.join(MODULES)} "
                            "(`attn-yolo modules`)")
    return out, problems


def _sites(raw, d: dict) -> tuple[list[Site], list[str]]:
    if raw == "auto":
        return auto_sites(d), []
    if not isinstance(raw, list) or not raw:
        return [], [f"search.sites: {raw!r}; expected auto or a list of sites (backbone, sppf, neck, 4, '4,6', "
                    "C3k2:neck)"]
    out, problems = [], []
    for j, s in enumerate(raw):
        try:
            out.append(parse_site(d, s))
        except Exception as e:  # noqa: BLE001  InsertionError, said with the site's key
            problems.append(f"search.sites[{j}]: {first_line(e).removeprefix('InsertionError: ')}")
    return out, problems


def _budget(sec: dict, rule: SearchRule | None, arms: int) -> list[str]:
    """``max_runs`` (declared in ``SEARCH``) against the first round: the baseline and every arm to ``min`` seeds."""
    mr = sec.get("max_runs")
    if mr is None or SEARCH["max_runs"].problem(mr) or rule is None or not arms:
        return []
    first = (arms + 1) * rule.at(arms).min
    if mr >= first:
        return []
    return [f"search.max_runs: {mr}; below one round: the first round runs the baseline and {arms} arms to "
            f"{rule.at(arms).min} seeds = {first} runs; set max_runs >= {first}"]


def _rule(sec: dict) -> tuple[SearchRule | None, list[str]]:
    """The search's ``SearchRule`` from ``seeds`` (the seed rule's one check), ``precision`` and ``confidence`` (their
    values checked by ``SEARCH``); ``(rule or None, problems)``."""
    seeds = sec.get("seeds", {})
    if not isinstance(seeds, dict):
        return None, [f"search.seeds: {seeds!r}; expected {SEARCH['seeds'].allowed}"]
    mx, mn = seeds.get("max", SearchRule.max), seeds.get("min")
    own = {k.name: k.value(seeds[k.name]) for k in SEEDS if k.name in seeds and k.name not in ("min", "max")}
    problems = SEEDS.unknown(seeds, "search.seeds.")
    problems += seed_rule_problems({**own, "max": mx, "min": mn}, "search.seeds.")  # the ablation's check too
    p, c = sec.get("precision", SearchRule.precision), sec.get("confidence", 0.95)
    if problems or any(SEARCH[k].problem(v) for k, v in (("precision", p), ("confidence", c))):
        return None, problems
    return SearchRule(max=mx, min=mn, precision=p, confidence=c, **own), []


def default_rule() -> SearchRule:
    """The embedded default search's rule (its ``search:`` section's seeds and precision), as the simulation reads
    it (``attn_yolo.search.simulate``)."""
    return _rule(yaml.safe_load(DEFAULT_YAML)["search"])[0]


def arms_of(blocks: list, sites: list[Site]) -> list[Arm]:
    """Every block × site, named ``<block>.<site>`` (``cbam.C3k2-neck``)."""
    return [Arm(f"{b.lower()}.{s.slug}", b, a, s) for b, a in blocks for s in sites]


def check_section(raw: dict) -> tuple[dict, list[Arm], SearchRule | None, list[Site], list[str]]:
    """The ``search:`` section checked: (section, arms, rule, sites, problems), every problem named by key."""
    from attn_yolo.insertion.base import load_base

    sec = raw.get("search")
    if not isinstance(sec, dict):
        return {}, [], None, [], [f"search: {sec!r}; expected a mapping with keys {', '.join(SEARCH.names)}"]
    _, problems = SEARCH.check({k: v for k, v in sec.items() if k != "seeds"}, "search.")  # seeds: _rule
    problems += [f"{k}: not in a search config (the search section sets it)" for k in NOT_IN_A_SEARCH if k in raw]
    blocks, p = _blocks(sec.get("blocks"))
    problems += p
    try:
        d = load_base(str(sec.get("model", "yolo11n.yaml")))
    except Exception as e:  # noqa: BLE001
        return sec, [], None, [], problems + [f"search.model: {first_line(e).removeprefix('InsertionError: ')}"]
    sites, p = _sites(sec.get("sites", "auto"), d)
    problems += p
    rule, p = _rule(sec)
    problems += p
    arms = arms_of(blocks, sites)
    n = len(arms) * (2 if sec.get("placebo") is True else 1)
    problems += _budget(sec, rule, n)
    return sec, arms, rule, sites, problems


def ablation_raw(raw: dict, sec: dict, arms: list[Arm]) -> dict:
    """The ablation config of the search: the baseline and every arm as an insert spec, seeds 0 .. max − 1."""
    model = str(sec.get("model", "yolo11n.yaml"))
    out = {k: copy.deepcopy(v) for k, v in raw.items() if k != "search"}
    out["variants"] = [{"name": BASELINE, "model": model}] + [
        {"name": a.name, "base": model, "module": a.site.module(a.block), "at": a.site.at,
         **({"args": a.args} if a.args is not None else {})} for a in arms]
    out["seeds"] = list(range(sec.get("seeds", {}).get("max", SearchRule.max)))
    if sec.get("placebo") is True:
        out["placebo"] = True
    return out


def validate(raw: dict, base: Path, name: str, source: str) -> Search:
    """Check a search config at once, before any work (``ablate.config.validate`` for the ablation's keys). With
    ``sites: auto``, a block × site the block cannot be built at is left out and said (``Search.unbuildable``), as
    the user named no such site; with sites given, it is an error.

    Raises:
        ConfigError: every problem, each named by its key (``search.sites[2]``, ``search: arm cbam.4``).
    """
    sec, arms, rule, sites, problems = check_section(raw)
    if problems:
        raise ConfigError(source, problems)
    ab = _ablation(raw, sec, arms, base, name, source)
    unbuildable = _unbuildable(ab) if sec.get("sites", "auto") == "auto" else {}
    if len(unbuildable) == len(arms):
        raise ConfigError(source, [f"search: arm {n}: does not build at any auto site: {why}"
                                   for n, why in unbuildable.items()])
    if unbuildable:
        arms = [a for a in arms if a.name not in unbuildable]
        ab = _ablation(raw, sec, arms, base, name, source)
    for v in ab.variants:
        v.key = f"search: arm {v.name}"
    rule = rule.at(len(ab.variants) - 1)
    # the design a rerun must keep (rerun.check_seed_design), named apart from the ablation's and earlier searches'
    ab.config["seeds"] = {**dataclasses.asdict(rule), "design": DESIGN}
    return Search(ab, str(sec.get("model", "yolo11n.yaml")), arms, rule, sites,
                  max_runs=sec.get("max_runs"), minutes=sec.get("minutes"), unbuildable=unbuildable)


def _unbuildable(ab) -> dict[str, str]:
    """The arms of ``ab`` that do not build (``attn_yolo.ablate.runs.prepare.build_all``, as the run would find before
    training), with the reason."""
    from attn_yolo.ablate.config import design
    from attn_yolo.ablate.runs.prepare import build_all

    base = design.arm_dict(next(v for v in ab.variants if v.name == ab.baseline))
    out = {}
    for v in ab.variants:
        if v.name != ab.baseline and (problem := build_all([v], ab.nc, ab.imgsz, base)):
            out[v.name] = problem[0].split(": does not build: ", 1)[-1]
    return out


def _ablation(raw: dict, sec: dict, arms: list[Arm], base: Path, name: str, source: str):
    """The search's ablation (``ablation_raw``) validated; its problems named by arm (``arm_key``)."""
    from attn_yolo.ablate.config.validate import validate as validate_ablation

    raw = ablation_raw(raw, sec, arms)
    raw.setdefault("out", f"runs/search/{name}")
    try:
        return validate_ablation(raw, base, name, source)
    except ConfigError as e:
        raise ConfigError(source, [arm_key(p) for p in e.problems]) from None


def arm_key(problem: str) -> str:
    """An ablation problem of an arm, named as the search names it: ``variants[3] (cbam.4)`` → ``search: arm
    cbam.4``."""
    return re.sub(r"^variants\[\d+\] \(([^)]+)\)", r"search: arm \1", problem)


def load(path: str | Path | None) -> tuple[dict, Path, str, str]:
    """Read a search config (None: the embedded default); as ``attn_yolo.ablate.config.ablation.load_config``."""
    from attn_yolo.ablate.config.ablation import default_source, load_config

    if path is not None:
        return load_config(path, "search")
    return yaml.safe_load(DEFAULT_YAML), Path.cwd(), DEFAULT_NAME, default_source("search")
