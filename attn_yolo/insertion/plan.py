"""The insertion plan: blocks placed after their base layers, every ``from`` index remapped, checked by a build.

A block ``[-1, 1, NAME, args]`` goes right after each chosen layer ``t`` of the base (several blocks after one layer
are chained in the order given). Every ``from`` reference (int, list, negative relative index) is rewritten:
references to ``t`` now read the last block after ``t``, so the next layer, a Concat or Detect sees the attended map;
every other reference reaches the same layer as before. Relative references stay relative, absolute ones absolute.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.conventions import OWN_KEY, OWN_VALUE, is_own, yaml_params
from attn_yolo.insertion import inner
from attn_yolo.insertion.base import InsertionError, load_base, model_rows
from attn_yolo.insertion.blocks import block_args, module_class
from attn_yolo.insertion.sites import resolve_sites
from attn_yolo.nn.common import AttnBuildError
from attn_yolo.registry import BLOCKS, CSP_BLOCKS, MODULES, canonical, csp_name


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


def as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, str):
        return [s.strip() for s in x.split(",") if s.strip()]
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _pairs(module, at, args) -> list[tuple[str, object, object]]:
    """(module, site spec, args) per requested block; see ``insert`` for the pairing rules."""
    mods = as_list(module)
    if not mods:
        raise InsertionError(f"module={module!r}: name at least one block: {', '.join(MODULES)}")
    if len(mods) == 1:
        return [(mods[0], at, args)]
    sites = as_list(at)
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


def make_plan(base, module, at, args, identity) -> tuple[dict, Plan]:
    """Compose the inserted model dict (not yet built) and its plan."""
    d = load_base(base)
    base_name = str(base) if not isinstance(base, dict) else str(d.get("yaml_file", "model.yaml"))
    rows, nb = model_rows(d), len(d["backbone"])
    chains, renamed, sites = _place_blocks(d, rows, base_name, module, at, args, identity)
    new_index, out = _new_indices(len(rows), chains)
    new, blocks = _new_rows(rows, nb, chains, renamed, new_index, out, base_name)
    d = {**{k: v for k, v in d.items() if k not in ("backbone", "head")}, **new}
    source = base_name if isinstance(base, dict) or Path(base).is_file() else f"Ultralytics' {base_name}"
    command = _insert_command(base_name, blocks, at, args, identity)
    plan = Plan(base_name, source, blocks, new_index, list(dict.fromkeys(sites)), command)
    plan.base_detect = copy.deepcopy(rows[-1][0])
    plan.base_model = {k: v for k, v in d.items() if k not in ("backbone", "head")} | {
        "backbone": copy.deepcopy(rows[:nb]), "head": copy.deepcopy(rows[nb:])}
    return own_marked(d, plan.base_model), plan


def _place_blocks(d: dict, rows: list, base_name: str, module, at, args, identity) -> tuple[dict, dict, list]:
    """Where each block goes: ``(chains, renamed, sites)``, ``chains[i]`` the blocks inserted after base row ``i``,
    ``renamed[i]`` the block that replaces base row ``i`` with attention inside (C3k2 -> C3k2_CBAM), ``sites`` the
    sites used.

    Raises:
        InsertionError: a site that selects no layer, a base row replaced twice.
    """
    chains: dict[int, list[Block]] = {}
    renamed: dict[int, Block] = {}  # base rows that get attention inside (C3k2 -> C3k2_CBAM)
    sites = []
    for mod, site, a in _pairs(module, at, args):
        name, _ = module_class(mod)
        a = block_args(name, a, identity)
        if name in CSP_BLOCKS:
            idx, used = inner.rows(d, name, site)
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
    return chains, renamed, sites


def _new_indices(n_rows: int, chains: dict) -> tuple[list[int], list[int]]:
    """``(new_index, out)``: each base row's index in the new model, and the index of the last row of its chain (what
    a later row reading it reads)."""
    new_index, out, k = [], [], 0
    for i in range(n_rows):
        new_index.append(i + k)
        k += len(chains.get(i, []))
        out.append(new_index[i] + len(chains.get(i, [])))
    return new_index, out


def _new_rows(rows, nb, chains, renamed, new_index, out, base_name) -> tuple[dict, list[Block]]:
    """The new ``{"backbone", "head"}`` rows (base rows with their ``from`` remapped, each followed by its chain) and
    the blocks in model order, their indices set."""
    new = {"backbone": [], "head": []}
    blocks = []
    for i, (f, n, m, a) in enumerate(rows):
        section = new["backbone" if i < nb else "head"]
        if b := renamed.get(i):
            b.index = new_index[i]
            m, a = b.name, inner.row_args(b.name, a, b.args)
            blocks.append(b)
        section.append([_remap(f, i, new_index, out, base_name), n, m, copy.deepcopy(a)])
        for j, b in enumerate(chains.get(i, [])):
            b.index = new_index[i] + j + 1
            section.append([-1, 1, b.name, b.args])
            blocks.append(b)
    return new, blocks


def _remap(f, i: int, new_index: list[int], out: list[int], base_name: str):
    """Row ``i``'s ``from`` (an index or a list) in the new model: absolute indices to their chain's last row,
    relative ones re-counted from the row's new index.

    Raises:
        InsertionError: a row that reads a layer that does not precede it.
    """
    def one(x):
        if i == 0 and x < 0:
            return x  # the input image
        t = x if x >= 0 else i + x
        if not 0 <= t < i:
            raise InsertionError(f"base={base_name!r}: row {i} reads layer {t}, which does not precede it")
        return out[t] if x >= 0 else out[t] - new_index[i]

    return [one(x) for x in f] if isinstance(f, list) else one(f)


def _insert_command(base_name: str, blocks: list[Block], at, args, identity) -> str:
    """The ``attn-yolo insert`` command that makes this plan."""
    cmd_args = [f"base={base_name}", f"module={','.join(dict.fromkeys(b.name for b in blocks))}", f"at={at_text(at)}"]
    if args is not None:
        cmd_args.append(f"args={json.dumps(args).replace(' ', '')}")
    if identity:
        cmd_args.append("identity=True")
    return "attn-yolo insert " + " ".join(cmd_args)


def own_marked(d: dict, base: dict) -> dict:
    """``d`` with the marker of the project's own rows (``attn_yolo_args: own``, ``conventions.OWN_KEY``): the rows
    insert writes hold the args they mean, so no compatibility note is said for them. Left off where the base has
    attention rows of its own without the marker (a public YAML's, read by the conventions, whose notes stay)."""
    if is_own(base) or not any(canonical(r[2]) or csp_name(r[2]) for r in model_rows(base)):
        d[OWN_KEY] = OWN_VALUE
    return d


def at_text(at) -> str:
    return ",".join(str(x) for x in at) if isinstance(at, (list, tuple)) else str(at)


def parse_rows(d: dict):
    """``parse_model`` on a copy of ``d`` at its scale (or the first one)."""
    dd = copy.deepcopy(d)
    scales = dd.get("scales") or {}
    if scales and dd.get("scale") not in scales:
        dd["scale"] = next(iter(scales))
    return api.parse_model(dd, ch=dd.get("channels", 3), verbose=False)[0]


def _shapes(seq, channels: int) -> dict[int, tuple[int, int]]:
    """``{layer: (channels, stride)}`` of each 4-D output of a built model up to Detect, from a 64×64 input."""
    seq.eval()
    side, y, x, out = 64, [], torch.zeros(1, channels, 64, 64), {}
    with torch.no_grad():
        for m in list(seq)[:-1]:  # up to Detect
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x)
            if isinstance(x, torch.Tensor) and x.dim() == 4:
                out[m.i] = (x.shape[1], side // x.shape[-1])
    return out


def check_build(d: dict, plan: Plan) -> None:
    """Build the base, check each inserted block's args at the width it gets (``check_args_at``), then build ``d``
    at the base's scale (or the first one), run a 64×64 input through it (fills ``plan.strides``) and check that each
    inserted row was built as given (``check_built_as_given``). The base is built first, so an error in one of its
    rows names the row as the base numbers it.

    Raises:
        InsertionError: the base or the inserted model does not build (e.g. a block hyperparameter invalid for the
            layer's width; for an inserted block the message says after which base layer it sits).
    """
    errors = (AttnBuildError, ValueError, TypeError, KeyError, RuntimeError)
    channels = d.get("channels", 3)
    try:
        base = _shapes(parse_rows(plan.base_model), channels)
    except errors as e:
        raise InsertionError(f"base={plan.base!r} does not build: {e}") from None
    own = {id(b): check_args_at(b, *base[b.after]) for b in plan.blocks if not b.replaced and b.after in base}
    try:
        seq = parse_rows(d)
    except errors as e:
        i = api.failed_row(e.__traceback__)
        block = next((b for b in plan.blocks if b.index == i), None)
        where = f" (row {i} is the {block.name} inserted after base layer {block.after})" if block else ""
        raise InsertionError(f"the inserted model does not build: {e}{where}") from None
    plan.strides = {i: st for i, (_, st) in _shapes(seq, channels).items()}
    for b in plan.blocks:
        if id(b) in own:
            check_built_as_given(b, seq[b.index], own[id(b)])


def _fingerprint(m: torch.nn.Module) -> list:
    """What a block's build amounts to: each submodule's type and plain hyperparameter attributes, each leaf's repr
    (``Conv2d(16, 1, kernel_size=(7, 7), ...)``), each tensor's shape; not the row bookkeeping Ultralytics adds."""
    skip = {"training", "i", "f", "type", "np"}
    plain = (bool, int, float, tuple, type(None))
    out = [(name, type(s).__name__, "" if any(True for _ in s.children()) else repr(s),
            sorted((k, v) for k, v in vars(s).items()
                   if not k.startswith("_") and k not in skip and isinstance(v, plain)))
           for name, s in m.named_modules()]
    return out + [(k, tuple(v.shape)) for k, v in m.state_dict().items()]


def check_args_at(b: Block, c1: int, stride: int) -> torch.nn.Module:
    """In ``insert``, ``args`` are the block's own hyperparameters (``attn-yolo modules``), not a public YAML
    convention (no leading channel count): build the block from them at the width ``c1`` it gets (on the meta
    device) and return it.

    Raises:
        InsertionError: ``ShuffleAttention after base layer 0 (P1/2, C=16): groups=64 is invalid; allowed: ...``.
    """
    cls = BLOCKS[b.name]
    params = [p for p in inspect.signature(cls).parameters if p != "c1"]
    kwargs = {k: None if v == "None" else v for k, v in zip(params, b.args)}
    where = f"{b.name} after base layer {b.after} (P{round(math.log2(stride))}/{stride}, C={c1})"
    try:
        with torch.device("meta"):
            return cls(c1, **kwargs)
    except AttnBuildError as e:
        raise InsertionError(f"{where}: {str(e).removeprefix(f'{b.name}: ')} (args are {b.name}'s own "
                             f"[{', '.join(params)}])") from None


def check_built_as_given(b: Block, built: torch.nn.Module, ref: torch.nn.Module) -> None:
    """The YAML row written for block ``b`` built what its args say (``ref``, from ``check_args_at``): the model
    YAML reader, which also reads public conventions, did not take a hyperparameter for a channel count.

    Raises:
        InsertionError: the row would build something else than its args say.
    """
    if _fingerprint(ref) != _fingerprint(built):
        raise InsertionError(f"{b.name} after base layer {b.after}: the YAML row [-1, 1, {b.name}, {b.args}] would "
                             f"be read otherwise than as {b.name}'s own [{', '.join(yaml_params(BLOCKS[b.name]))}] "
                             f"(the log line above says how it was read, and the edit where one exists)")


def default_out(base: str, blocks: list[Block]) -> str:
    """Default output name: the base's stem (scale letter kept) plus the block names: ``yolo11n-cbam.yaml``."""
    return f"{Path(base).stem}-{'-'.join(dict.fromkeys(b.name.lower() for b in blocks))}.yaml"
