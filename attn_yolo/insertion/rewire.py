"""Rewire a detect model YAML around inserted attention blocks: sites, ``from`` index remapping, the YAML text.

Insertion::

    attn-yolo insert base=yolo11n.yaml module=CBAM at=backbone                  # writes yolo11n-cbam.yaml
    attn-yolo insert base=yolov8s.yaml module=SE,MHSA at=backbone,sppf args=[[16],[4]] out=models/yolov8s-se-mhsa.yaml
    attn-yolo insert base=yolo11n.yaml module=CBAM at=4,6,10 pretrained=base.pt   # + yolo11n-cbam.pt, weights carried

    >>> import attn_yolo
    >>> model = attn_yolo.insert("yolo11n.yaml", "CBAM", at="backbone", args=[16, 7])   # an Ultralytics YOLO
    >>> model.train(data="path/to/data.yaml", epochs=10)
    >>> d = attn_yolo.insertion.insert_dict("yolo11n.yaml", "CBAM")   # the model dict only, as yaml_model_load's

A block ``[-1, 1, NAME, args]`` goes right after each chosen layer ``t`` of the base (several blocks after one layer
are chained in the order given). Every ``from`` reference (int, list, negative relative index) is rewritten:
references to ``t`` now read the last block after ``t``, so the next layer, a Concat or Detect sees the attended map;
every other reference reaches the same layer as before. Relative references stay relative, absolute ones absolute.

Sites (``at``), as the literature places attention in YOLO:

- ``backbone``: after each backbone layer that a head row reads (the P3/P4/P5 outputs the neck taps; for YOLO11 layers
  4, 6 and 10, the last one reached by the first head row's ``-1``).
- ``sppf``: after the last backbone layer (SPPF in YOLOv8, C2PSA after SPPF in YOLO11/YOLO26): P5, fewest tokens.
- ``neck``: after each layer Detect reads, so Detect sees the attended maps.
- layer indices of the base (``at=4,6,10``); any layer but the Detect row.

``base`` is a path or the name of a detect YAML shipped with Ultralytics (``yolov8s.yaml``, ``yolo11n.yaml``,
``yolo26m.yaml``, ...; resolved by ``ultralytics.nn.tasks.yaml_model_load``). Supported heads: ``Detect`` (incl. the
YOLO26 end-to-end head, ``end2end: True``) and ``v10Detect``; segment/pose/obb/classify bases raise ``InsertionError``.

Scale: the output keeps ``scales:`` and builds at every scale. Ultralytics takes the scale from the *file name*
(``yaml_model_load`` overwrites any ``scale:`` key with ``guess_model_scale(path)``), so no ``scale:`` key is written:
the default output name keeps the base's scale letter (``yolo11n.yaml`` + CBAM -> ``yolo11n-cbam.yaml``, built at n);
an ``out`` name that selects another scale (or none: Ultralytics then builds the first scale) is written with a
warning. The model dict (``insert_dict``) records ``scale`` (``"n"``), so ``DetectionModel(d)`` builds the base's scale.

Identity at init (``identity=True``; the CLI default when ``pretrained`` is given, ``transfer``'s default for a YAML
target): every inserted block gets ``init_values=0.0`` written into its YAML args (the constructor defaults before it
are filled in from ``inspect.signature``, so a re-parsed checkpoint rebuilds the same parameters). Each block then
computes ``y = x + γ ⊙ (block(x) − x)`` with a per-channel ``γ`` initialised to 0 (``attn_yolo.layer_scale``):
LayerScale (Touvron et al., "Going deeper with Image Transformers", ICCV 2021) used as a zero-initialised residual
gate, as in ReZero (Bachlechner et al., 2020) and zero-γ residual init (Goyal et al., 2017). At ``γ = 0`` the block is
exactly the identity, so the augmented model with transferred weights predicts exactly what the base predicts; the
first gradient step moves ``γ`` (``∂L/∂γ = (block(x) − x) · ∂L/∂y``), after which the block's own weights train.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import json
import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from attn_yolo import build
from attn_yolo.checkpoint import atomic_write, check_out
from attn_yolo.conventions import NONE_MEANS, bind
from attn_yolo.insertion import inner
from attn_yolo.nn.common import AttnBuildError
from attn_yolo.registry import ALIASES, BLOCKS, CSP_BLOCKS, MODULES, canonical, check_yaml_modules

SITES = ("backbone", "sppf", "neck")
DETECT_HEADS = ("Detect", "v10Detect")

PLACEMENT = {
    "backbone": "at the backbone outputs that the neck taps, so the attended P3/P4/P5 maps feed every FPN/PAN path "
    "(and Detect through them), where the SE/CBAM-in-YOLO literature puts channel and spatial attention. Chosen over "
    "the neck outputs because one block per scale then benefits the top-down and the bottom-up paths alike.",
    "sppf": "after the last backbone layer (P5, stride 32), where tokens are fewest (400 at 640 px): global "
    "self-attention stays cheap there (O(N²) in tokens), as in BoTNet (Srinivas et al., CVPR 2021) and Ultralytics' "
    "own C2PSA; every neck path and Detect's P5 branch read it.",
    "neck": "at the maps Detect reads (the FPN/PAN outputs), so the attention re-weights exactly the fused features "
    "the detection head sees.",
    "layers": "at the layers chosen explicitly.",
    "inside": inner.PLACEMENT,
}


class InsertionError(ValueError):
    """Bad input to ``insert`` or ``transfer``: the message names the argument, the value and what is allowed."""


# ----------------------------------------------------------------------------------------------------------- base


def load_base(base: str | Path | dict) -> dict:
    """Return the model dict of ``base``: a dict (copied), a YAML path, or the name of a YAML shipped with Ultralytics.

    The scale letter of the name is recorded as ``d["scale"]`` (``yolo11n.yaml`` -> ``"n"``; ``""`` if none).

    Raises:
        InsertionError: the file is missing, is not valid YAML, is not a detect model YAML, or a row is malformed
            (named by its row number in ``base``).
    """
    from ultralytics.nn.tasks import yaml_model_load

    if isinstance(base, dict):
        d, name = copy.deepcopy(base), str(base.get("yaml_file", "<dict>"))
    else:
        name = str(base)
        if not name.lower().endswith((".yaml", ".yml")):
            raise InsertionError(f"base={name!r}: expected a model YAML (path or Ultralytics name like yolo11n.yaml)")
        try:
            d = yaml_model_load(name)
        except (yaml.YAMLError, ValueError) as e:  # Ultralytics' YAML.load re-raises syntax errors as ValueError
            msg = " ".join(str(e).split("Verify YAML")[0].split())
            raise InsertionError(f"base={name!r} is not valid YAML: {msg}") from None
        except (FileNotFoundError, OSError) as e:
            raise InsertionError(
                f"base={name!r}: no such file, and not a model YAML shipped with Ultralytics "
                f"(e.g. yolov8n.yaml, yolo11s.yaml, yolo26m.yaml): {e}"
            ) from None
    rows_ok = all(isinstance(d.get(k) if isinstance(d, dict) else None, list) and d[k] for k in ("backbone", "head"))
    if not rows_ok:
        raise InsertionError(f"base={name!r} is not a model YAML: it needs non-empty 'backbone' and 'head' lists")
    try:
        check_yaml_modules(d)  # rows numbered as in the user's base, before any insertion renumbers them
    except (ValueError, KeyError) as e:
        raise InsertionError(f"base={name!r}: {e}") from None
    head = d["head"][-1][2]
    if head not in DETECT_HEADS:
        from ultralytics.nn.tasks import guess_model_task

        task = guess_model_task(d) or "non-detect"
        raise InsertionError(
            f"base={name!r} is a {task} model (last layer {head}); insert supports detect bases, whose last layer is "
            f"one of {', '.join(DETECT_HEADS)} (e.g. yolo11n.yaml, not yolo11n-seg.yaml)"
        )
    return d


def _rows(d: dict) -> list[list]:
    return d["backbone"] + d["head"]


def _targets(f, i: int) -> list[int]:
    """Absolute layer indices a row ``i`` with ``from`` field ``f`` reads (-1 at row 0 is the input image)."""
    return [x if x >= 0 or i == 0 else i + x for x in (f if isinstance(f, list) else [f])]


def resolve_sites(d: dict, at) -> tuple[list[int], list[str]]:
    """Base layer indices for a site spec ``at`` (a site name, an index, or a list / comma string of them).

    Returns:
        (indices, site names used) with indices sorted and unique.

    Raises:
        InsertionError: unknown site, or an index out of range (the Detect row is not a valid site).
    """
    rows, nb = _rows(d), len(d["backbone"])
    last = len(rows) - 1
    items = at.split(",") if isinstance(at, str) else list(at) if isinstance(at, (list, tuple)) else [at]
    out, names = set(), []
    for item in items:
        item = item.strip() if isinstance(item, str) else item
        if isinstance(item, str) and re.fullmatch(r"-?\d+", item):
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise InsertionError(f"at={at!r}: {item!r} is not a site; allowed: {', '.join(SITES)} or layer indices")
        if isinstance(item, int):
            if not 0 <= item < last:
                raise InsertionError(
                    f"at={at!r}: layer {item} is out of range; the base has layers 0..{last} and a block can follow "
                    f"layers 0..{last - 1} (layer {last} is {rows[last][2]})"
                )
            out.add(item)
            names.append("layers")
        elif item == "backbone":
            out |= {t for i in range(nb, len(rows)) for t in _targets(rows[i][0], i) if 0 <= t < nb}
            names.append(item)
        elif item == "sppf":
            out.add(nb - 1)
            names.append(item)
        elif item == "neck":
            out |= set(_targets(rows[last][0], last))
            names.append(item)
        else:
            close = difflib.get_close_matches(item, SITES, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            allowed = f"Allowed: {', '.join(SITES)} or layer indices"
            raise InsertionError(f"at={at!r}: unknown site {item!r}.{hint} {allowed}")
    return sorted(out), list(dict.fromkeys(names))


# -------------------------------------------------------------------------------------------------------- modules


def module_class(name: str) -> tuple[str, type]:
    """``(YAML name, class)`` of an attention block, its name or an alias; case-insensitive. For a block inside a
    CSP block (``C3k2_CBAM``, ``attn_yolo.csp``): its name and the attention class inside (``CBAM``).

    Raises:
        InsertionError: naming the choices.
    """
    if isinstance(name, str):
        for key in [*BLOCKS, *ALIASES]:
            if key.lower() == name.strip().lower() and (block := canonical(key)):
                return block, BLOCKS[block]
        if derived := inner.derived_name(name):
            return derived, CSP_BLOCKS[derived].attention
    close = difflib.get_close_matches(str(name).upper(), list(MODULES), n=1, cutoff=0.5)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    raise InsertionError(f"module={name!r}: unknown attention block.{hint} Allowed: {', '.join(MODULES)}, or one of "
                         "them inside the base's C2f / C3k2 / SPPF rows: C3k2_CBAM, C2f_SE, SPPF_ECA, ...")


def _attention(name: str) -> type:
    """The attention class a block name (or alias) builds; for ``C3k2_CBAM`` the block inside (``CBAM``)."""
    return BLOCKS[canonical(name)] if canonical(name) else CSP_BLOCKS[name].attention


def block_args(name: str, args, identity: bool) -> list:
    """YAML args for block ``name``: ``args`` checked against its signature and written positionally (CBAM's lone
    kernel ``[7]`` becomes ``[16, 7]``, see ``attn_yolo.conventions``); with ``identity``, defaults filled up to
    ``init_values = 0.0``. ``None`` is written as the string ``"None"``, as PyYAML loads it from Ultralytics' YAMLs.

    Raises:
        InsertionError: too many args, or ``init_values`` given with another value than 0.0 while ``identity``.
    """
    name, cls = module_class(name)
    params = [p for p in inspect.signature(cls).parameters.values() if p.name != "c1"]
    names = [p.name for p in params]
    args = [] if args is None else list(args) if isinstance(args, (list, tuple)) else [args]
    if len(args) > len(params):
        raise InsertionError(f"args={args!r}: {name} takes at most {len(params)} args [{', '.join(names)}]")
    kwargs = bind(name, cls, args)[0]
    args = [kwargs.get(p.name, p.default) for p in params[: max((names.index(k) + 1 for k in kwargs), default=0)]]
    args = ["None" if a is None else a for a in args]
    if identity:
        if "init_values" not in names:
            raise InsertionError(f"{name} has no init_values argument, so it cannot start as the identity")
        k = names.index("init_values")
        if len(args) > k and args[k] != 0.0:
            raise InsertionError(
                f"args={args!r}: {name} init_values={args[k]!r}, but identity=True sets init_values=0.0 "
                f"(pass identity=False to keep yours)"
            )
        args += [("None" if p.default is None else p.default) for p in params[len(args) : k]]
        args[k:] = [0.0]
    return args


def _describe_args(name: str, args: list) -> str:
    """``r=16, k=7``: the block's effective hyperparameters (defaults filled in; None shown only where it means
    something, e.g. ECA's adaptive k)."""
    params = [p for p in inspect.signature(_attention(name)).parameters.values() if p.name != "c1"]
    vals = [(p.name, args[i] if i < len(args) else p.default) for i, p in enumerate(params)]
    vals = [(n, NONE_MEANS.get((name, n)) if v in (None, "None") else v) for n, v in vals]
    return ", ".join(f"{n}={v}" for n, v in vals if v is not None)


def _reference(name: str) -> str:
    cls = BLOCKS.get(name) or CSP_BLOCKS[name]
    return (cls.__doc__ or name).strip().splitlines()[0].rstrip(".")


# ---------------------------------------------------------------------------------------------------------- insert


@dataclass
class Block:
    """One inserted row: module ``name`` with YAML ``args`` after base layer ``after``, at new index ``index``; or,
    with ``replaced`` (the base's module, ``C3k2``), base layer ``after`` itself renamed to ``name`` (``C3k2_CBAM``)."""

    name: str
    args: list
    after: int
    index: int = -1
    replaced: str = ""


@dataclass
class Plan:
    """What ``insert`` did: the blocks, the base → new index map, sites and per-layer strides (new indices)."""

    base: str
    source: str
    blocks: list[Block]
    new_index: list[int]
    sites: list[str]
    command: str
    strides: dict[int, int] = field(default_factory=dict)
    base_detect: list[int] = field(default_factory=list)
    base_model: dict = field(default_factory=dict)

    def level(self, base_layer: int) -> str:
        s = self.strides.get(self.new_index[base_layer])
        return f"P{round(math.log2(s))}/{s}" if s else ""


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, str):
        return [s.strip() for s in x.split(",") if s.strip()]
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _pairs(module, at, args) -> list[tuple[str, object, object]]:
    """(module, site spec, args) per requested block; see ``insert`` for the pairing rules."""
    mods = _as_list(module)
    if not mods:
        raise InsertionError(f"module={module!r}: name at least one block: {', '.join(MODULES)}")
    if len(mods) == 1:
        return [(mods[0], at, args)]
    sites = _as_list(at)
    if len(sites) == 1:
        sites = sites * len(mods)
    if len(sites) != len(mods):
        raise InsertionError(
            f"module={module!r} names {len(mods)} blocks but at={at!r} gives {len(sites)} sites; give one site for "
            f"all or one per block (e.g. at=backbone,sppf)"
        )
    if args is None:
        args = [None] * len(mods)
    if not (isinstance(args, (list, tuple)) and len(args) == len(mods) and all(
            a is None or isinstance(a, (list, tuple)) for a in args)):
        raise InsertionError(
            f"args={args!r}: with {len(mods)} blocks give one args list per block, e.g. [[16, 7], [4]]"
        )
    return list(zip(mods, sites, args))


def _plan(base, module, at, args, identity) -> tuple[dict, Plan]:
    """Compose the inserted model dict (not yet built) and its plan."""
    d = load_base(base)
    base_name = str(base) if not isinstance(base, dict) else str(d.get("yaml_file", "model.yaml"))
    rows, nb = _rows(d), len(d["backbone"])
    chains: dict[int, list[Block]] = {}
    renamed: dict[int, Block] = {}  # base rows that get attention inside (C3k2 -> C3k2_CBAM)
    sites = []
    for mod, site, a in _pairs(module, at, args):
        name, _ = module_class(mod)
        a = block_args(name, a, identity)
        if name in CSP_BLOCKS:
            idx, used = inner.rows(d, name, site, InsertionError)
            sites += used
            for t in idx:
                if t in renamed:
                    raise InsertionError(f"module={module!r}: base layer {t} is replaced twice ({renamed[t].name}, "
                                         f"{name}); one block inside a row")
                renamed[t] = Block(name, copy.deepcopy(a), t, replaced=rows[t][2])
            continue
        idx, used = resolve_sites(d, site)
        if not idx:
            raise InsertionError(f"at={site!r} selects no layer of base={base_name!r}")
        sites += used
        for t in idx:
            chains.setdefault(t, []).append(Block(name, copy.deepcopy(a), t))

    new_index, out, k = [], [], 0
    for i in range(len(rows)):
        new_index.append(i + k)
        k += len(chains.get(i, []))
        out.append(new_index[i] + len(chains.get(i, [])))

    def remap(f, i):
        def one(x):
            if i == 0 and x < 0:
                return x  # the input image
            t = x if x >= 0 else i + x
            if not 0 <= t < i:
                raise InsertionError(f"base={base_name!r}: row {i} reads layer {t}, which does not precede it")
            return out[t] if x >= 0 else out[t] - new_index[i]

        return [one(x) for x in f] if isinstance(f, list) else one(f)

    new = {"backbone": [], "head": []}
    blocks = []
    for i, (f, n, m, a) in enumerate(rows):
        section = new["backbone" if i < nb else "head"]
        if b := renamed.get(i):
            b.index = new_index[i]
            m, a = b.name, inner.row_args(b.name, a, b.args)
            blocks.append(b)
        section.append([remap(f, i), n, m, copy.deepcopy(a)])
        for j, b in enumerate(chains.get(i, [])):
            b.index = new_index[i] + j + 1
            section.append([-1, 1, b.name, b.args])
            blocks.append(b)
    d = {**{k: v for k, v in d.items() if k not in ("backbone", "head")}, **new}
    cmd_args = [f"base={base_name}", f"module={','.join(dict.fromkeys(b.name for b in blocks))}", f"at={_at_str(at)}"]
    if args is not None:
        cmd_args.append(f"args={json.dumps(args).replace(' ', '')}")
    if identity:
        cmd_args.append("identity=True")
    source = base_name if isinstance(base, dict) or Path(base).is_file() else f"Ultralytics' {base_name}"
    command = "attn-yolo insert " + " ".join(cmd_args)
    plan = Plan(base_name, source, blocks, new_index, list(dict.fromkeys(sites)), command)
    plan.base_detect = copy.deepcopy(rows[-1][0])
    plan.base_model = {k: v for k, v in d.items() if k not in ("backbone", "head")} | {
        "backbone": copy.deepcopy(rows[:nb]), "head": copy.deepcopy(rows[nb:])}
    return d, plan


def _at_str(at) -> str:
    return ",".join(str(x) for x in at) if isinstance(at, (list, tuple)) else str(at)


def _parse(d: dict):
    """``parse_model`` on a copy of ``d`` at its scale (or the first one)."""
    from ultralytics.nn import tasks

    dd = copy.deepcopy(d)
    scales = dd.get("scales") or {}
    if scales and dd.get("scale") not in scales:
        dd["scale"] = next(iter(scales))
    return tasks.parse_model(dd, ch=dd.get("channels", 3), verbose=False)[0]


def _check_build(d: dict, plan: Plan) -> None:
    """Build the base, then ``d``, at the base's scale (or the first one) and run a 64×64 input through ``d``: fills
    ``plan.strides``. The base is built first, so an error in one of its rows names the row as the base numbers it.

    Raises:
        InsertionError: the base or the inserted model does not build (e.g. a block hyperparameter invalid for the
            layer's width; for an inserted block the message says after which base layer it sits).
    """
    errors = (AttnBuildError, ValueError, TypeError, KeyError, RuntimeError)
    try:
        _parse(plan.base_model)
    except errors as e:
        raise InsertionError(f"base={plan.base!r} does not build: {e}") from None
    try:
        seq = _parse(d)
    except errors as e:
        i = build.failed_row(e.__traceback__)
        block = next((b for b in plan.blocks if b.index == i), None)
        where = f" (row {i} is the {block.name} inserted after base layer {block.after})" if block else ""
        raise InsertionError(f"the inserted model does not build: {e}{where}") from None
    seq.eval()
    side, y, x = 64, [], torch.zeros(1, d.get("channels", 3), 64, 64)
    with torch.no_grad():
        for m in list(seq)[:-1]:  # up to Detect
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x)
            if isinstance(x, torch.Tensor) and x.dim() == 4:
                plan.strides[m.i] = side // x.shape[-1]


def insert_dict(
    base: str | Path | dict,
    module: str | list[str] = "CBAM",
    at="backbone",
    args: list | None = None,
    *,
    identity: bool = False,
    out: str | Path | None = None,
    overwrite: bool = False,
    check: bool = True,
) -> dict:
    """Insert attention blocks into the detect model ``base`` and return the new model dict (``insert`` without
    building the model; the arguments are ``insert``'s).

    Args:
        check: build the model at its scale before returning (and before writing), so a hyperparameter that does
            not fit a layer fails here; also gives the strides shown in the header.

    Returns:
        dict: the model dict (``backbone``, ``head``, the base's other keys, ``scale`` from the base name and
        ``yaml_file``: ``out`` or the default name), ready for ``DetectionModel(d)``.

    Raises:
        InsertionError: as ``insert``.
    """
    if out is not None:
        check_out(out, overwrite, error=InsertionError)
    d, plan = _plan(base, module, at, args, identity)
    if check:
        _check_build(d, plan)
    d["yaml_file"] = str(out) if out is not None else default_out(plan.base, plan.blocks)
    if out is not None:
        write_yaml(d, plan, out, overwrite=overwrite)
    return d


def insert(
    base: str | Path | dict,
    module: str | list[str] = "CBAM",
    at="backbone",
    args: list | None = None,
    *,
    identity: bool = False,
    out: str | Path | None = None,
    overwrite: bool = False,
):
    """Insert attention blocks into the detect model ``base``; return the new model as an Ultralytics ``YOLO``.

    The result trains, predicts and exports as a ``YOLO`` built from a YAML does, and ``YOLO(result)`` accepts it::

        >>> model = attn_yolo.insert("yolo11n.yaml", "CBAM", at="backbone", args=[16, 7])
        >>> model.train(data="path/to/data.yaml", epochs=10)      # or YOLO(model).train(...)

    Args:
        base: path or Ultralytics name of a detect model YAML (``yolo11n.yaml``), or a model dict.
        module: block name (``"CBAM"``) or several (``["SE", "MHSA"]`` / ``"SE,MHSA"``); see ``attn_yolo.MODULES``.
        at: site for the block(s): ``"backbone"``, ``"sppf"``, ``"neck"``, a base layer index, or a list / comma
            string of these (their union). With several modules, either one site spec for all (chained at each
            layer in the given order) or one per module (``at=["backbone", "sppf"]``; an entry may be a list of
            indices).
        args: the block's hyperparameters (``[16, 7]``); with several modules one list per module (``[[16], [4]]``).
        identity: write ``init_values=0.0`` into every inserted row, so each block starts as the identity.
        out: also write the YAML here (header comment, same layout as Ultralytics' files); the result is then
            ``YOLO(out)``. None: write nothing; the model is built from a YAML in a temporary folder (removed before
            returning) named as ``out`` would default to (``yolo11n-cbam.yaml``: the base's scale), and is named so.
        overwrite: replace an existing ``out``.

    Returns:
        ultralytics.YOLO: the new model, randomly initialised (``attn_yolo.transfer`` carries base weights into it).
        Its model dict is ``result.model.yaml``; ``attn_yolo.insertion.insert_dict`` returns the dict alone, without
        building the model.

    Raises:
        InsertionError: unknown site or module, index out of range, non-detect or invalid base, bad args, model does
            not build, ``out`` exists without ``overwrite``.
    """
    from ultralytics import YOLO

    d = insert_dict(base, module, at, args, identity=identity, out=out, overwrite=overwrite)
    if out is not None:
        return YOLO(str(out))
    name = d["yaml_file"]
    with tempfile.TemporaryDirectory(prefix="attn-yolo-insert-") as tmp:
        path = Path(tmp) / name
        path.write_text(yaml_text(d))
        yolo = YOLO(str(path))
    # The YAML file is gone: name the model as the default out= would (the exporter writes <name>.onnx), and let
    # train() build it from its model dict as Ultralytics does for an in-memory model (Model.load: ckpt = {"model":
    # model}) with freshly seeded weights (Model.reset_weights: pretrained=False), instead of re-reading the file.
    yolo.cfg = yolo.model_name = yolo.overrides["model"] = yolo.model.args["model"] = name
    yolo.model.yaml["yaml_file"] = name
    yolo.ckpt = {"model": yolo.model}
    yolo.overrides["pretrained"] = False
    return yolo


def default_out(base: str, blocks: list[Block]) -> str:
    """Default output name: the base's stem (scale letter kept) plus the block names: ``yolo11n-cbam.yaml``."""
    return f"{Path(base).stem}-{'-'.join(dict.fromkeys(b.name.lower() for b in blocks))}.yaml"


# ------------------------------------------------------------------------------------------------------------ YAML


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
        lines.append(f"Inserted: {name} [{_describe_args(name, bl[0].args)}]: {_reference(name)}.")
        after = ", ".join(f"{b.after}" + (f" ({plan.level(b.after)})" if plan.level(b.after) else "") for b in bl)
        plural = "s" if len(bl) > 1 else ""
        how = f"in place of the {bl[0].replaced} of base layer" if bl[0].replaced else "after base layer"
        lines.append(f"  {how}{plural} {after} -> new layer{plural} {', '.join(str(b.index) for b in bl)}.")
    for site in plan.sites:
        lines.append(f"Placement ({site}): {PLACEMENT[site]}")
    det = _rows(d)[-1][0]
    strides = "/".join(str(plan.strides[i]) for i in det if i in plan.strides)
    if all(b.replaced for b in plan.blocks):
        lines.append("No row is added: every layer keeps its index, every `from` is unchanged"
                     f"{f'; Detect reads strides {strides}' if strides else ''}.")
    else:
        lines.append(
            "Every `from` index is rewired: consumers of a chosen layer read its block; every other reference reaches "
            f"the same layer as before{f'; Detect reads strides {strides}' if strides else ''}."
        )
    if any(len(b.args) > _param_index(b.name) and b.args[_param_index(b.name)] == 0.0 for b in plan.blocks):
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
            lines.append(f"{k}: {_flow(v, d)}" + (" # number of classes" if k == "nc" else ""))
    new_rows = {b.index: b for b in plan.blocks} if plan else {}
    base_of = {n: i for i, n in enumerate(plan.new_index)} if plan else {}
    i = 0
    for section in ("backbone", "head"):
        lines += ["", f"{section}:"] + (["  # [from, repeats, module, args]"] if section == "backbone" else [])
        for f, n, m, a in d[section]:
            note = ""
            if i in new_rows and new_rows[i].replaced:
                b = new_rows[i]
                note = f" base {b.after}: {b.replaced} with {_attention(b.name).__name__} inside"
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


# -------------------------------------------------------------------------------------------------------- transfer


def _same_row(a: list, b: list) -> bool:
    return (a[1] == b[1] and a[2] == b[2] and a[3] == b[3]) or inner.replaces(a, b)


def layer_map(base: dict, new: dict) -> dict[int, int]:
    """Map each base layer index to its index in ``new``, a model dict made by inserting attention blocks into ``base``.

    Rows must appear in the same order with equal repeats, module and args (or the base's C2f / C3k2 / SPPF renamed
    to a block with attention inside, ``C3k2_CBAM``, same args before X's mapping); the extra rows of ``new`` must be
    attention blocks (``attn_yolo.MODULES`` or an alias), and each row's ``from`` must reach the mapped layer or a
    block chained right after it.

    Raises:
        InsertionError: naming the first row that breaks this.
    """
    br, nr = _rows(base), _rows(new)
    m, j = {}, 0
    for i, row in enumerate(br):
        while j < len(nr) and not _same_row(row, nr[j]):
            if canonical(nr[j][2]) is None:
                raise InsertionError(
                    f"model row {j} {nr[j][1:]} matches neither base row {i} {row[1:]} nor an inserted attention "
                    f"block: the model is not the base with blocks inserted"
                )
            j += 1
        if j == len(nr):
            raise InsertionError(f"base row {i} {row[1:]} has no match in the model: not the base with blocks inserted")
        m[i], j = j, j + 1
    if j != len(nr):
        raise InsertionError(f"model rows {j}..{len(nr) - 1} follow the base's last layer (Detect)")
    inserted = set(range(len(nr))) - set(m.values())
    for i, row in enumerate(br[1:], 1):
        ts, tns = _targets(row[0], i), _targets(nr[m[i]][0], m[i])
        if len(ts) != len(tns):
            raise InsertionError(f"model row {m[i]} reads {len(tns)} layers, base row {i} reads {len(ts)}")
        for t, tn in zip(ts, tns):
            if not (tn == m[t] or (m[t] < tn and all(k in inserted for k in range(m[t] + 1, tn + 1)))):
                raise InsertionError(
                    f"model row {m[i]} reads layer {tn}, but base row {i} reads base layer {t} (model layer {m[t]})"
                )
    return m


def _param_index(name: str) -> int:
    """Number of YAML args before ``init_values`` for block ``name`` (or an alias)."""
    params = [p.name for p in inspect.signature(_attention(name)).parameters.values() if p.name != "c1"]
    return params.index("init_values")
