"""The arms a config names: each variant checked and its model dict composed (an insert spec planned, not built)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from attn_yolo.ablate.config.ablation import INSERT_VARIANT_KEYS, MODEL_VARIANT_KEYS, Variant, first_line
from attn_yolo.ablate.config.checks import resolve_input, unknown_keys
from attn_yolo.conventions import OWN_KEY
from attn_yolo.text import did_you_mean


def block_name(module) -> str | None:
    """The block a variant's ``module`` names (or the blocks of a list, joined by ``,``): its YAML name or an alias
    (``attn_yolo.registry.ALIASES``), as ``attn-yolo insert`` accepts it (case-insensitive); None if it names no
    block."""
    from attn_yolo.insertion import InsertionError, module_class

    try:
        return ",".join(module_class(m)[0] for m in (module if isinstance(module, list) and module else [module]))
    except InsertionError:
        return None


def definition(d: dict) -> str:
    """The model a dict builds, as text: its keys but the file name and the own-rows marker (``OWN_KEY``: it changes
    what is logged, not what is built), so a shipped ``models/*.yaml`` and the same insert spec are one model."""
    skip = ("yaml_file", OWN_KEY)
    return json.dumps({k: v for k, v in d.items() if k not in skip}, sort_keys=True, default=str)


def insert_file_name(base: str, name: str) -> str:
    """File name of an insert spec's model YAML: keeps the base's name, so Ultralytics reads the same scale from it
    (``yolo11n.yaml`` + ``cbam`` → ``yolo11n-cbam.yaml``)."""
    return f"{Path(base).stem}-{name}.yaml"


def one_line(e: BaseException) -> str:
    """A row error's message on one line (an ``UnknownModuleError``, a ``KeyError``, without its quotes)."""
    return " ".join(str(e.args[0] if isinstance(e, KeyError) and e.args else e).split())


def check_same_scale(start: dict, d: dict) -> None:
    """Raise ``InsertionError`` when model dict ``d`` is built at another scale than ``start`` (the same rows, other
    widths: no weight would fit)."""
    from attn_yolo.insertion import InsertionError

    a, b = start.get("scale"), d.get("scale")
    if a and b and a != b:
        raise InsertionError(f"it is built at scale {b!r}, the start at scale {a!r}")


def check_variants(
    raw_variants, base: Path, pretrained: dict | None = None, what: str = "train.pretrained"
) -> tuple[list[Variant], str | None, list]:
    """Check every variant and compose its model dict, without building it (``attn_yolo.ablate.runs.prepare`` builds);
    returns (variants, baseline name, problems).

    A model YAML is read (``yaml_model_load``); an insert spec is planned (``insert_dict(check=False)``: blocks placed,
    ``from`` indices remapped). With ``pretrained`` (the model dict of ``train.pretrained`` or of the start), each
    variant must be that model, or that model with attention blocks inserted, so that ``attn_yolo.transfer`` can carry
    every weight to its layer (``layer_map``, on the model dicts).
    """
    problems, variants, names, baseline = [], [], {}, None
    if not isinstance(raw_variants, list) or not raw_variants:
        return [], None, ["variants: expected a non-empty list of {name, model} or {name, base, module, at, args}"]
    flagged = [i for i, v in enumerate(raw_variants) if isinstance(v, dict) and v.get("baseline") is True]
    if len(flagged) > 1:
        problems.append(f"variants: more than one has `baseline: true` (variants{flagged})")
    for i, v in enumerate(raw_variants):
        name, key, p = _variant_keys(v, f"variants[{i}]", names, i)
        problems += p
        if p or not isinstance(name, str):
            continue
        if v.get("baseline") is True or (not flagged and i == 0):
            baseline = name
        variant, p = _variant_model(v, key, name, base, pretrained, what)
        problems += p
        variants += [variant] if variant is not None else []
    return variants, baseline, problems


def _variant_keys(v, key: str, names: dict, i: int) -> tuple[str | None, str, list[str]]:
    """One variant's keys: its name (unique; recorded in ``names``), ``baseline``, either ``model`` or ``base`` +
    ``module`` (+ ``at``, ``args``); ``(name, its key in messages, problems)``."""
    from attn_yolo.registry import MODULES

    if not isinstance(v, dict):
        return None, key, [f"{key}: expected a mapping {{name, model}} or {{name, base, module, at, args}}"]
    problems, name = [], v.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", name):
        problems.append(f"{key}.name: {name!r}; expected a name of letters, digits, '_', '.', '+', '-'")
    elif name in names:
        problems.append(f"{key}.name: duplicate variant name {name!r} (also variants[{names[name]}])")
    else:
        names[name] = i
    key = f"{key} ({name})" if isinstance(name, str) else key
    if "baseline" in v and not isinstance(v["baseline"], bool):
        problems.append(f"{key}.baseline: {v['baseline']!r}; expected true or false")
    if ("model" in v) == ("base" in v):
        problems.append(f"{key}: give either `model` (a model YAML) or `base` + `module` (an insert spec)")
        return name, key, problems
    is_insert = "base" in v
    problems += unknown_keys(v, INSERT_VARIANT_KEYS if is_insert else MODEL_VARIANT_KEYS, f"{key}.")
    if is_insert:
        if "module" not in v:
            problems.append(f"{key}.module: missing; one of {', '.join(MODULES)}")
        elif not block_name(v["module"]):
            hint = did_you_mean(v["module"], MODULES, cutoff=0.5)
            problems.append(
                f"{key}.module: unknown module {v['module']!r}{hint}; one of {', '.join(MODULES)} or an alias "
                "(`attn-yolo modules`)"
            )
        if "args" in v and not isinstance(v["args"], list):
            problems.append(f"{key}.args: {v['args']!r}; expected a list of hyperparameters")
        if not isinstance(v["base"], str):
            problems.append(f"{key}.base: {v['base']!r}; expected a model YAML path")
    elif not isinstance(v["model"], str) or not v["model"].lower().endswith((".yaml", ".yml")):
        problems.append(f"{key}.model: {v['model']!r}; expected a model YAML (.yaml); for weights use "
                        "train.pretrained")
    return name, key, problems


def _variant_model(v: dict, key: str, name: str, base: Path, pretrained: dict | None, what: str
                   ) -> tuple[Variant | None, list[str]]:
    """One variant's model dict as the trainer will read it (planned, not built), checked: modules the trainer
    takes, a detect model, and (with ``pretrained``) the weights carried by layer; ``(Variant or None, problems)``."""
    from ultralytics.nn.tasks import guess_model_task, yaml_model_load

    from attn_yolo.insertion import InsertionError, insert_dict, layer_map
    from attn_yolo.registry import check_yaml_modules

    is_insert = "base" in v
    where = "" if is_insert else ".model"
    try:  # the model dict as the trainer will read it; built by prepare
        if is_insert:
            spec = {"base": resolve_input(v["base"], base), **{k: v[k] for k in ("module", "at", "args") if k in v}}
            d = insert_dict(**spec, check=False)
            model = insert_file_name(spec["base"], name)
            d["yaml_file"] = model
        else:
            spec, model = None, resolve_input(v["model"], base)
            d = yaml_model_load(model)
    except Exception as e:  # noqa: BLE001  any failure to read or plan the model is this variant's problem
        return None, [f"{key}{where}: {'cannot be inserted' if is_insert else 'does not load'}: {first_line(e)}"]
    try:  # rows the trainer would refuse (attention after Detect, unknown names, ...): said as the build says them
        check_yaml_modules(d)
    except (KeyError, ValueError) as e:
        return None, [f"{key}{where}: {one_line(e)}"]
    if (task := guess_model_task(d)) != "detect":
        return None, [f"{key}{where}: is a {task} model; ablations train detect models"]
    if pretrained is not None:
        try:
            check_same_scale(pretrained, d)
            layer_map(pretrained, d, (what, "variant"))
        except InsertionError as e:
            return None, [f"{key}: is not the {what} model (with attention blocks inserted), so its weights "
                          f"cannot be carried over: {first_line(e)}"]
    return Variant(name, model, d if is_insert else None, definition(d), key, spec), []
