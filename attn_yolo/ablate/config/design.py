"""The design keys of an ablation config (start, seeds, reference, placebo): their checks and the arms they add.

The design keys of an ablation config (``start``, ``seeds`` as a rule, ``reference``, ``placebo``): their checks
before any training, and the arms they add.

- ``start``: the one point every arm starts from. A checkpoint (``start: path/to/base.pt``, loaded weights-only,
  its class count must be the data's), or a recipe (``start: {epochs: 6}``) that the runner trains once into
  ``out/start/`` (``attn_yolo.ablate.runs.start``). A recipe trains ``model`` (default: the baseline's model YAML) with
  the config's ``train`` arguments, its own keys overriding them, and ``seed`` (default 0). Each variant must be the
  start model with blocks inserted; ``attn_yolo.transfer`` carries every weight to its layer and the blocks start as the
  identity. Without ``start`` every arm trains from scratch (the summary says so).
- ``seeds: {min, max, precision, confidence, design, spending, looks}``: paired seeds 0, 1, ... run in rounds until
  the stopping rule of ``attn_yolo.ablate.statistics.sequential`` stops (``SeedRule``: ``design: spending`` with
  ``spending: obf`` by default, or ``pocock``; ``design: cs``); a list of seeds is a fixed design.
- ``reference: {model: yolo11s.yaml}`` (or an insert spec; ``name`` defaults to ``reference``): an arm with a known,
  larger change, the yardstick of the summary. If it is the start model with blocks inserted it starts from the
  shared start like a variant; otherwise it gets a start of its own trained by the same recipe (with a checkpoint
  start: ``reference.start``, its own checkpoint), so that it has had the same training as the baseline.
- ``placebo: true`` (every variant) or a list of variant names: per variant, an arm ``<variant>-placebo`` with a
  ``Placebo`` block (``attn_yolo.nn.placebo``: a residual pointwise MLP, no attention) where each of its blocks sits,
  sized to the block's parameter count.
- ``new_blocks`` and ``treatment``: how an arm's new blocks train and the check that they mattered, in
  ``attn_yolo.ablate.statistics.treatment``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path

from attn_yolo.ablate.config.ablation import first_line
from attn_yolo.ablate.config.checks import check_train, resolve_input
from attn_yolo.ablate.config.variants import check_same_scale, check_variants, definition
from attn_yolo.checkpoint import load_model
from attn_yolo.text import did_you_mean

START_OWN_KEYS = ("model", "seed")  # a recipe's keys that are not Ultralytics train arguments
PLACEBO_SUFFIX = "-placebo"
REFERENCE_NAME = "reference"
UNFINGERPRINTED_TRAIN_KEYS = {"device", "plots", "verbose"}  # train args that do not change a result (as the runner's)


@dataclasses.dataclass
class Start:
    """Where arms start: a checkpoint, a recipe trained once into ``folder``, or (``init``) each seed's own untrained
    initialisation of the start model, written per seed into ``folder`` and shared by that seed's arms."""

    kind: str  # "checkpoint" | "recipe" | "init"
    model: str  # checkpoint: the .pt file; recipe, init: the model YAML it trains (init: initialises)
    model_dict: dict  # the start model's dict (each arm must be it, with blocks inserted)
    fingerprint: str  # checkpoint: of its bytes; recipe: of its settings (model, data, train args, seed)
    train: dict = dataclasses.field(default_factory=dict)  # recipe: Ultralytics train arguments
    seed: int = 0  # recipe: its seed
    folder: str = ""  # recipe: where it trains (out/start, out/start-<arm>)
    arm: str = ""  # "" for the shared start, else the arm that starts here alone (a reference of another model)
    write_model: bool = False  # recipe: train from model_dict written as `model` (an insert spec), not the YAML

    @property
    def weights(self) -> str:
        """The checkpoint the arms carry their weights from (``init``: ``weights_for`` a seed)."""
        return self.model if self.kind == "checkpoint" else str(Path(self.folder) / "weights" / "best.pt")

    def weights_for(self, seed: int) -> str:
        """The checkpoint the arms of ``seed`` carry their weights from: an ``init`` start's seed's own, else
        ``weights``."""
        return str(Path(self.folder) / f"{self.fingerprint}-seed{seed}.pt") if self.kind == "init" else self.weights

    def describe(self) -> str:
        """One line for the plan and the summary."""
        if self.kind == "checkpoint":
            return f"warm start from checkpoint {self.model}"
        from attn_yolo.ablate.runs.outdir import shown

        if self.kind == "init":
            return (f"shared initialisation: each seed's arms start from {Path(self.model).name} initialised with "
                    f"that seed, untrained (nothing is trained before the arms; in {shown(self.folder)})")

        tr = ", ".join(f"{k}={v}" for k, v in self.train.items() if k in ("epochs", "imgsz", "fraction", "batch"))
        where = shown(self.folder)
        return f"warm start from {Path(self.model).name} trained once ({tr}, seed {self.seed}) into {where}"


INIT = "init"  # `start: init`: each seed's arms share that seed's untrained initialisation of the start model
START_KINDS = ("a checkpoint (.pt), a recipe mapping, e.g. {epochs: 6}, or init (each seed's untrained "
               "initialisation, shared by its arms)")


def fingerprint(*parts) -> str:
    """16 hex digits of the SHA-256 of ``parts`` as canonical JSON."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def file_fingerprint(path: str | Path) -> str:
    """16 hex digits of the SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------------- seeds


def check_seed_rule(raw: dict):
    """``seeds: {min, max, precision, confidence, design, spending, looks}`` → (the seeds it may run: 0 .. max − 1,
    the ``SeedRule``, problems). Every problem names its key (``sequential.seed_rule_problems``, the search's check
    too)."""
    from attn_yolo.ablate.statistics.sequential import SEED_RULE, SeedRule, seed_rule_problems

    names = SEED_RULE.names
    problems = [f"seeds.{k}: unknown key{did_you_mean(k, names)}; allowed: {', '.join(names)} (or a list of seeds)"
                for k in raw if k not in names]
    given = {k.name: k.value(raw[k.name]) for k in SEED_RULE if k.name in raw}  # a choice lower-cased
    problems += seed_rule_problems({**dataclasses.asdict(SeedRule()), **given})
    if problems:
        return [], None, problems
    rule = SeedRule(**given)
    return list(range(rule.max)), rule, []


# ---------------------------------------------------------------------------------------------------------- start


def baseline_model(raw_variants) -> str | None:
    """The ``model`` of the baseline variant as written (the one with ``baseline: true``, else the first), or None."""
    if not isinstance(raw_variants, list):
        return None
    rows = [v for v in raw_variants if isinstance(v, dict)]
    base = next((v for v in rows if v.get("baseline") is True), rows[0] if rows else None)
    return base.get("model") if isinstance(base, dict) and isinstance(base.get("model"), str) else None


def split_recipe(raw: dict, raw_variants) -> tuple[str | None, int, dict, list[str]]:
    """A recipe's ``model`` (default: the baseline's model YAML), ``seed`` and train arguments, with problems."""
    problems = []
    model = raw.get("model", baseline_model(raw_variants))
    if not isinstance(model, str) or not model.lower().endswith((".yaml", ".yml")):
        problems.append(f"start.model: {model!r}; expected a model YAML (default: the baseline's `model`, which is "
                        "not a model YAML here)")
        model = None
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.append(f"start.seed: {seed!r}; expected an int >= 0")
        seed = 0
    train = {k: v for k, v in raw.items() if k not in START_OWN_KEYS}
    return model, seed, train, problems


def checkpoint_problems(path: str, key: str, nc: int | None, model_dict: dict) -> list[str]:
    """A start checkpoint must be trained for the data's classes (its head is carried as is)."""
    got = model_dict.get("nc")
    if nc is not None and got != nc:
        return [f"{key}: {path} is a model for {got} classes, the data has {nc}; a start must be trained on this "
                "data's classes (train one: `start: {epochs: 6}`)"]
    return []


# -------------------------------------------------------------------------------------------------- reference arm


def reference_raw(raw) -> tuple[dict | None, str | None, list[str]]:
    """``reference`` as a variant spec (its ``name`` defaulted) and its own ``start`` checkpoint, with problems."""
    if raw is None:
        return None, None, []
    if not isinstance(raw, dict):
        return None, None, [f"reference: {raw!r}; expected a mapping {{model: yolo11s.yaml}} (or an insert spec)"]
    spec = {"name": REFERENCE_NAME, **{k: v for k, v in raw.items() if k != "start"}}
    own = raw.get("start")
    if own is not None and not isinstance(own, str):
        return None, None, [f"reference.start: {own!r}; expected a checkpoint (.pt) of the reference model"]
    return spec, own, []


# ---------------------------------------------------------------------------------------------------- placebo arms


def placebo_targets(raw, variant_names: list[str], baseline: str) -> tuple[list[str], list[str]]:
    """The variants that get a placebo arm: ``true`` → all but the baseline, a list → those; with problems."""
    if raw in (None, False):
        return [], []
    others = [v for v in variant_names if v != baseline]
    if raw is True:
        return others, []
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
        return [], [f"placebo: {raw!r}; expected true (a placebo arm per variant) or a list of variant names"]
    bad = [v for v in raw if v not in others]
    if bad:
        return [], [f"placebo: {', '.join(map(repr, bad))} is not a variant other than the baseline; one of "
                    f"{', '.join(others) or '(none)'}"]
    return list(dict.fromkeys(raw)), []


def arm_dict(v) -> dict:
    """The model dict of a checked variant (``attn_yolo.ablate.config.ablation.Variant``): its insert spec's, or its
    YAML's."""
    from ultralytics.nn.tasks import yaml_model_load

    return v.model_dict or yaml_model_load(v.model)


def inserted_rows(name: str, baseline_dict: dict, variant_dict: dict) -> tuple[dict[int, int], list[int]]:
    """``(layer_map, rows of the variant that are blocks inserted into the baseline)``.

    Raises:
        ValueError: the variant inserts no block into the baseline (``InsertionError``: it is not the baseline with
            blocks inserted).
    """
    from attn_yolo.insertion import layer_map

    m = layer_map(baseline_dict, variant_dict, ("baseline", "variant"))
    inserted = sorted(set(range(len(variant_dict["backbone"]) + len(variant_dict["head"]))) - set(m.values()))
    if not inserted:
        raise ValueError(f"variant {name!r} inserts no block into the baseline: nothing for a placebo to match")
    return m, inserted


def placebo_spec(name: str, variant_dict: dict, baseline_dict: dict, baseline_model, nc: int) -> dict:
    """The insert spec of ``name``'s placebo arm: a ``Placebo`` wherever the variant has a block inserted into the
    baseline, each sized to that block's parameter count (its LayerScale γ aside: the placebo has one too). Builds
    the variant (``attn_yolo.ablate.runs.prepare`` calls it, in the run).

    Raises:
        ValueError: the variant is not the baseline with blocks inserted, or one of its blocks has no parameters
            (a placebo of equal size would be the identity).
    """
    import torch
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.nn.placebo import placebo_hidden

    m, inserted = inserted_rows(name, baseline_dict, variant_dict)
    model = DetectionModel(copy.deepcopy(variant_dict), nc=nc, verbose=False)
    sites, args = [], []
    for j in inserted:
        block = model.model[j]
        params = sum(p.numel() for k, p in block.named_parameters() if not k.startswith("scale."))
        kind = type(block).__name__
        if not params:
            raise ValueError(f"variant {name!r}: its {kind} (layer {j}) has no parameters, so a placebo of the same "
                             "size is the identity: leave it out of `placebo`")
        sites.append(max(i for i, k in m.items() if k < j))
        gamma = getattr(getattr(block, "scale", None), "gamma", None)
        a = [placebo_hidden(params, block.c1)]
        if isinstance(gamma, torch.Tensor):
            a.append(float(gamma.detach().flatten()[0]))
        args.append(a)
    if len(sites) == 1:  # one block: insert's one-module form (a one-module list would read args as one block's)
        return {"name": f"{name}{PLACEBO_SUFFIX}", "base": baseline_model, "module": "Placebo", "at": sites[0],
                "args": args[0]}
    return {"name": f"{name}{PLACEBO_SUFFIX}", "base": baseline_model, "module": ["Placebo"] * len(sites),
            "at": sites, "args": args}


# ------------------------------------------------------------------------------------------------ the arms' checks


def check_start(raw, key: str, base: Path, nc, train: dict, has_devices: bool, trust: bool, raw_variants,
                data_id: str) -> tuple[Start | None, list[str]]:
    """``start`` (or ``reference.start``) → a ``Start``: a checkpoint (loaded weights-only unless ``trust``,
    for the data's classes) or a recipe (its train arguments checked as ``train``'s); with problems."""
    from ultralytics.nn.tasks import yaml_model_load

    if raw is None:
        return None, []
    if raw == INIT:
        model = baseline_model(raw_variants)
        if not isinstance(model, str) or not model.lower().endswith((".yaml", ".yml")):
            return None, [f"{key}: {INIT}; needs the baseline's `model` to be a model YAML, not {model!r}"]
        try:
            d = yaml_model_load(resolve_input(model, base))
        except Exception as e:  # noqa: BLE001  any failure to read the YAML is a config problem
            return None, [f"{key}: {INIT}: the baseline's model {model!r} does not load: {first_line(e)}"]
        return Start(INIT, resolve_input(model, base), d, fingerprint(definition(d), INIT, nc)), []
    if isinstance(raw, str) and not raw.lower().endswith(".pt"):
        return None, [f"{key}: {raw!r}; expected {START_KINDS}"]
    if isinstance(raw, str):
        path = resolve_input(raw, base)
        try:
            model = load_model(path, key, suffixes=(".pt",), trust=trust)
        except ValueError as e:
            return None, [" ".join(str(e).split()).replace(f"{key}=", f"{key}: ", 1)]
        d = copy.deepcopy(model.yaml)
        p = checkpoint_problems(path, key, nc, d)
        return (None if p else Start("checkpoint", str(Path(path).resolve()), d, file_fingerprint(path))), p
    if not isinstance(raw, dict):
        return None, [f"{key}: {raw!r}; expected {START_KINDS}"]
    model, seed, own, problems = split_recipe(raw, raw_variants)
    extra, p = check_train(own, base, has_devices)
    problems += [f"{key}.{q.removeprefix('train.')}" for q in p]
    if model is None or problems:
        return None, problems
    model = resolve_input(model, base)
    try:
        d = yaml_model_load(model)
    except Exception as e:  # noqa: BLE001  any failure to read the YAML is a config problem
        return None, [f"{key}.model: does not load: {first_line(e)}"]
    tr = {**train, **extra}
    tr.pop("pretrained", None)
    fp = fingerprint(definition(d), data_id, {k: v for k, v in sorted(tr.items()) if k not in
                                                      UNFINGERPRINTED_TRAIN_KEYS}, seed)
    return Start("recipe", model, d, fp, tr, seed), []


def check_arms(raw: dict, base: Path, nc, variants: list, baseline: str, start: Start | None,
               trust: bool) -> tuple[dict, list[str]]:
    """The arms the design adds: the reference (with its own start where it is not the start model with blocks
    inserted) and the names of the placebo arms (``prepare`` sizes and adds them: that needs the variants built);
    returns ({"variants", "reference", "placebos", "starts"}, problems)."""
    out = {"variants": [], "placebos": {}, "starts": {}}
    by_name = {v.name: v for v in variants}
    problems = []
    if start is not None and (b := by_name.get(baseline)) is not None:
        bd = arm_dict(b)
        if len(bd["backbone"]) + len(bd["head"]) != len(start.model_dict["backbone"]) + len(start.model_dict["head"]):
            problems.append(f"variants ({baseline}): with `start`, the baseline is the start model itself (fine-tuned "
                            "like every arm); insert blocks in the other variants")
    placebos, p = _placebo_arms(raw, variants, baseline)
    problems += p
    if not problems:
        out["placebos"] = placebos
    names = {v.name for v in variants} | set(out["placebos"])
    ref, own_start, p = reference_raw(raw.get("reference"))
    problems += p
    if ref is None:
        return out, problems
    if ref.get("name") in names:
        problems.append(f"reference.name: {ref['name']!r} is taken by a variant; name the reference arm otherwise")
        return out, problems
    r, p = _reference_arm(ref, base, variants, baseline)
    problems += p
    if r is None:
        return out, problems
    starts, p = _reference_start(r, own_start, start, base, nc, trust)
    problems += p
    out["starts"].update(starts)
    out["variants"].append(r)
    out["reference"] = r.name
    return out, problems


def _placebo_arms(raw: dict, variants: list, baseline: str) -> tuple[dict, list[str]]:
    """``placebo``: ``{placebo arm name: its variant}`` for each variant that is the baseline with blocks inserted,
    and problems."""
    names = {v.name for v in variants}
    by_name = {v.name: v for v in variants}
    raw_by_name = {v.get("name"): v for v in raw.get("variants") or [] if isinstance(v, dict)}
    targets, problems = placebo_targets(raw.get("placebo"), [v.name for v in variants], baseline)
    if targets and "model" not in raw_by_name.get(baseline, {}):
        return {}, problems + ["placebo: needs a baseline given as `model` (a model YAML), not an insert spec"]
    for t in targets:
        if f"{t}{PLACEBO_SUFFIX}" in names:
            problems.append(f"placebo: the arm name {t + PLACEBO_SUFFIX!r} is taken by a variant; rename that variant")
            continue
        try:
            inserted_rows(t, arm_dict(by_name[baseline]), arm_dict(by_name[t]))
        except ValueError as e:  # InsertionError too: not the baseline with blocks inserted
            problems.append(f"placebo: {first_line(e)}")
    return {f"{t}{PLACEBO_SUFFIX}": t for t in targets}, problems


def _reference_arm(ref: dict, base: Path, variants: list, baseline: str):
    """The reference arm as a checked ``Variant`` (a known change of its own), or None; ``(arm, problems)``."""
    built, _, p = check_variants([{k: v for k, v in ref.items() if k != "baseline"}], base)
    if p:
        return None, [f"reference{q.removeprefix('variants[0] (' + str(ref['name']) + ')')}" for q in p]
    r = dataclasses.replace(built[0], key="reference")
    if r.definition == next(v for v in variants if v.name == baseline).definition:
        return None, [f"reference: {ref.get('model') or ref.get('base')!r} is the baseline model; the yardstick "
                      "needs a known, larger change, e.g. the next model scale (yolo11s.yaml)"]
    if same := next((v for v in variants if v.name != baseline and v.definition == r.definition), None):
        return None, [f"reference: the same model as {same.key}; the yardstick needs a known change of its own, "
                      "e.g. the next model scale (yolo11s.yaml), not one of the variants under test"]
    return r, []


def _carries(model_dict: dict, r) -> str | None:
    """Why the weights of ``model_dict`` cannot be carried to arm ``r`` by layer, or None."""
    from attn_yolo.insertion import InsertionError, layer_map

    try:
        rd = arm_dict(r)
        check_same_scale(model_dict, rd)
        layer_map(model_dict, rd)
    except InsertionError as e:
        return first_line(e)
    return None


def _reference_start(r, own_start, start: Start | None, base: Path, nc, trust: bool) -> tuple[dict, list[str]]:
    """The reference's own start where it is not the start model with blocks inserted: its checkpoint
    (``reference.start``) beside a checkpoint ``start``, else the same recipe on its model; ``({arm: Start},
    problems)``."""
    warm = start is not None and _carries(start.model_dict, r) is None
    if own_start is not None and (start is None or warm or start.kind != "checkpoint"):
        return {}, ["reference.start: only where the reference is another model than the start's, with a "
                    "checkpoint `start` (a recipe `start` trains the reference's own start by the same recipe)"]
    if start is None or warm:
        return {}, []
    if start.kind != "checkpoint":  # the same recipe, on the reference's model
        fp = fingerprint(start.fingerprint, r.definition)
        return {r.name: dataclasses.replace(start, model=r.model, model_dict=arm_dict(r), fingerprint=fp, arm=r.name,
                                            folder="", write_model=r.model_dict is not None)}, []
    if own_start is None:
        return {}, ["reference.start: missing; the reference is not the start model with blocks inserted, so it "
                    "needs a checkpoint of its own, trained like the start"]
    s, problems = check_start(own_start, "reference.start", base, nc, {}, False, trust, [], "")
    if s is None:
        return {}, problems
    if (why := _carries(s.model_dict, r)) is not None:
        return {}, problems + [f"reference.start: is not the reference model: {why}"]
    return {r.name: dataclasses.replace(s, arm=r.name)}, problems
