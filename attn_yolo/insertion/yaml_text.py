"""The YAML text of an inserted model: Ultralytics' layout, one flow row per line, a header on what went where.

Scale: the output keeps ``scales:`` and builds at every scale. Ultralytics takes the scale from the *file name*
(``yaml_model_load`` overwrites any ``scale:`` key with ``guess_model_scale(path)``), so no ``scale:`` key is written:
the default output name keeps the base's scale letter (``yolo11n.yaml`` + CBAM -> ``yolo11n-cbam.yaml``, built at n);
an ``out`` name that selects another scale (or none: Ultralytics then builds the first scale) is written with a
warning. The model dict (``insert_dict``) records ``scale`` (``"n"``), so ``DetectionModel(d)`` builds the base's scale.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from attn_yolo.conventions import OWN_KEY
from attn_yolo.files import atomic_write, check_out
from attn_yolo.insertion.base import InsertionError, model_rows
from attn_yolo.insertion.blocks import attention_class, block_reference, describe_args, param_index
from attn_yolo.insertion.plan import Plan, default_out
from attn_yolo.insertion.sites import PLACEMENT

COMMENTS = {"nc": " # number of classes",
            OWN_KEY: " # rows' args are attn-yolo's own, as meant: no notes about other code's defaults"}


def _flow(v, d: dict) -> str:
    """One value in Ultralytics' flow style: ``[None, 2, "nearest"]``, ``[nc]``, ``True``, ``0.25``."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        s = repr(v)
        return s.replace("e", ".0e", 1) if "e" in s and "." not in s else s  # PyYAML needs a dot: 1.0e-06
    if isinstance(v, str):  # names Ultralytics resolves (None, nc, ...) plain, other strings quoted
        return v if v == "None" or v in d else json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_flow(x, d) for x in v) + "]"
    return yaml.safe_dump(v, default_flow_style=True, width=10**6).strip()


def _scale_num(x) -> str:
    """``0.50`` as in Ultralytics' ``scales:`` rows."""
    return f"{x:.2f}" if isinstance(x, float) and round(x, 2) == x else str(x)


def _header(d: dict, plan: Plan, out: Path) -> list[str]:
    from ultralytics.nn.tasks import guess_model_scale

    names = list(dict.fromkeys(b.name for b in plan.blocks))
    lines = [f"attn-yolo: {Path(plan.base).stem} + {' + '.join(names)}, written by `{plan.command} out={out}`."]
    scale = f", scale {d['scale']}" if d.get("scale") else ""
    lines.append(f"Base: {plan.source}{scale}; scales kept, so this file builds at every scale.")
    for name in names:
        bl = [b for b in plan.blocks if b.name == name]
        lines.append(f"Inserted: {name} [{describe_args(name, bl[0].args)}]: {block_reference(name)}.")
        after = ", ".join(f"{b.after}" + (f" ({plan.level(b.after)})" if plan.level(b.after) else "") for b in bl)
        plural = "s" if len(bl) > 1 else ""
        how = f"in place of the {bl[0].replaced} of base layer" if bl[0].replaced else "after base layer"
        lines.append(f"  {how}{plural} {after} -> new layer{plural} {', '.join(str(b.index) for b in bl)}.")
    for site in plan.sites:
        lines.append(f"Placement ({site}): {PLACEMENT[site]}")
    det = model_rows(d)[-1][0]
    strides = "/".join(str(plan.strides[i]) for i in det if i in plan.strides)
    if all(b.replaced for b in plan.blocks):
        lines.append("No row is added: every layer keeps its index, every `from` is unchanged"
                     f"{f'; Detect reads strides {strides}' if strides else ''}.")
    else:
        lines.append(
            "Every `from` index is rewired: consumers of a chosen layer read its block; every other reference reaches "
            f"the same layer as before{f'; Detect reads strides {strides}' if strides else ''}."
        )
    if any(len(b.args) > param_index(b.name) and b.args[param_index(b.name)] == 0.0 for b in plan.blocks):
        lines.append(
            "init_values=0.0: y = x + γ⊙(block(x) − x) with γ = 0 at init (LayerScale, Touvron et al., ICCV 2021): "
            "each block starts as the identity, so weights transferred from the base predict as the base did."
        )
    lines.append(
        f"Needs `import attn_yolo` (or the `attn-yolo` CLI) to register {', '.join(names)}; plain `yolo` raises "
        f"KeyError: '{names[0]}'."
    )
    scale, m = guess_model_scale(out), re.search(r"yolo(e-)?v?\d+", out.stem)
    rest = "Args are hyperparameters only; input channels come from the layer the row reads."
    if scale or m:
        example = out.name if scale else out.stem[: m.end()] + "n" + out.stem[m.end() :] + out.suffix
        example = example if out.is_absolute() else str(out.with_name(example))
        lines.append(
            f'Scale from the file name, as Ultralytics does: YOLO("{example}") builds scale {scale or "n"} from this '
            f"file (s, m, l, x likewise). {rest}"
        )
    else:
        first = next(iter(d.get("scales") or {"n": 0}))
        lines.append(
            f'This file name carries no scale: YOLO("{out.name}") builds the first scale ({first}), as Ultralytics '
            f'does; a name like "{default_out(plan.base, plan.blocks)}" selects one. {rest}'
        )
    return lines


def _wrap(text: str, width: int = 118) -> list[str]:
    """Wrap a header line at ``width``; continuation lines are indented two spaces past the line's own indent."""
    lead = text[: len(text) - len(text.lstrip(" "))]
    lines, cur = [], lead
    for w in text.split():
        if cur.strip() and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = lead + "  " + w
        else:
            cur = f"{cur} {w}" if cur.strip() else cur + w
    return [*lines, cur]


def yaml_text(d: dict, plan: Plan | None = None, out: str | Path = "model.yaml") -> str:
    """The YAML text of model dict ``d``: header comment (from ``plan``), top-level keys, one flow row per line.

    Raises:
        InsertionError: if the text would not load back to ``d`` (a value PyYAML reads differently).
    """
    lines = []
    if plan is not None:
        for h in _header(d, plan, Path(out)):
            lines += [f"# {x}" for x in _wrap(h)]
        lines.append("")
    skip = ("backbone", "head", "scale", "yaml_file")
    for k, v in d.items():
        if k in skip:
            continue
        if k == "scales" and isinstance(v, dict):
            lines.append("scales: # [depth, width, max_channels]")
            lines += [f"  {s}: [{', '.join(_scale_num(a) for a in x)}]" for s, x in v.items()]
        else:
            lines.append(f"{k}: {_flow(v, d)}" + COMMENTS.get(k, ""))
    new_rows = {b.index: b for b in plan.blocks} if plan else {}
    base_of = {n: i for i, n in enumerate(plan.new_index)} if plan else {}
    i = 0
    for section in ("backbone", "head"):
        lines += ["", f"{section}:"] + (["  # [from, repeats, module, args]"] if section == "backbone" else [])
        for f, n, m, a in d[section]:
            note = ""
            if i in new_rows and new_rows[i].replaced:
                b = new_rows[i]
                note = f" base {b.after}: {b.replaced} with {attention_class(b.name).__name__} inside"
            elif i in new_rows:
                note = f" inserted after base {new_rows[i].after}"
            elif i in base_of and base_of[i] != i:
                note = f" (base {base_of[i]})"
            lines.append(f"  - [{_flow(f, d)}, {n}, {m}, {_flow(a, d)}] # {i}{note}")
            i += 1
    text = "\n".join(lines) + "\n"
    want = {k: v for k, v in d.items() if k not in ("scale", "yaml_file")}
    if yaml.safe_load(text) != want:
        raise InsertionError("internal: the YAML text does not load back to the model dict")
    return text


def write_yaml(d: dict, plan: Plan | None, out: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``yaml_text(d, plan, out)`` to ``out`` (atomically; warns if the file name selects another scale)."""
    from ultralytics.nn.tasks import guess_model_scale
    from ultralytics.utils import LOGGER

    out = Path(out)
    check_out(out, overwrite, error=InsertionError)
    text = yaml_text(d, plan, out)
    atomic_write(out, lambda p: Path(p).write_text(text))
    want, got = d.get("scale") or "", guess_model_scale(out)
    first = next(iter(d.get("scales") or {"n": 0}))
    if want and (got or first) != want:  # a name without a scale letter builds the first scale listed
        LOGGER.warning(
            f"attn-yolo insert: the base was scale '{want}' but YOLO('{out}') builds scale '{got or first}' "
            f"(Ultralytics reads the scale from the file name); name it like '{default_out(plan.base, plan.blocks)}'"
            if plan
            else f"attn-yolo insert: YOLO('{out}') builds scale '{got or first}', not '{want}'"
        )
    return out
