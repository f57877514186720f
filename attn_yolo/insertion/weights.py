"""Carry a base model's weights into the model made by inserting blocks into its YAML, layer by layer.

Weight transfer::

    >>> report = attn_yolo.transfer("base.pt", "yolo11n-cbam.yaml")   # or a YOLO object / DetectionModel
    >>> print(report)   # transferred 499/499 tensors from base; 21 new tensors initialised (...)

``transfer`` aligns the base's layers with the new model's (same rows in the same order; the extra rows must be
attention blocks, and each ``from`` must reach the mapped layer or a block chained after it), renames every state-dict
key ``model.{i}.`` to ``model.{new i}.`` and loads it with a shape check: 100% of the base's tensors, or an error.
A YAML / dict target is built with the base's class count (a base fine-tuned on 5 classes gives a 5-class model).
Ultralytics' own loading (``DetectionModel.load`` -> ``intersect_dicts``, what the trainer does with
``pretrained=base.pt``) matches by *name and shape*; after an insertion the names past the first block point at other
layers, so it loads fewer tensors and some into the wrong layers (``tests/test_insertion.py`` shows both).

Training from a base checkpoint with correct transfer -- use one of:

1. ``attn-yolo insert base=yolo11n.yaml module=CBAM pretrained=base.pt`` writes ``yolo11n-cbam.yaml`` and the checkpoint
   ``yolo11n-cbam.pt``; then ``attn-yolo train model=yolo11n-cbam.pt data=...``. Ultralytics rebuilds the model from
   the checkpoint's own YAML and loads the checkpoint's weights by name: every name matches, everything transfers
   (the class head adapts to a dataset with another ``nc`` as for any checkpoint).
2. ``model = YOLO("yolo11n-cbam.yaml"); attn_yolo.transfer("base.pt", model); model.train(data=...)``: ``transfer``
   marks the YOLO object as holding checkpoint weights (``model.ckpt``), so ``train`` starts from them exactly as from
   a loaded ``.pt``. The YAML needs the base's ``nc`` and, for identity at init, ``insert(..., identity=True)``.

Do not pass ``pretrained=base.pt`` to ``train`` (Ultralytics' name matching, wrong after an insertion) nor
``pretrained=False`` (Ultralytics then starts from random weights).

Errors (``InsertionError``, a ``ValueError``; ``AttnBuildError`` for a block hyperparameter out of range) name the bad
input and what is allowed; on error no file is written, and an existing output is only replaced with ``overwrite``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.checkpoint import load_model
from attn_yolo.insertion import inner
from attn_yolo.insertion.base import InsertionError, model_rows
from attn_yolo.insertion.blocks import block_args, param_index
from attn_yolo.insertion.layer_map import layer_map


@dataclass
class TransferReport:
    """Result of ``transfer``: counts, the layer map, the new layers and whether they start as the identity."""

    transferred: int
    total: int
    new: int
    layer_map: dict[int, int]
    inserted: list[int]
    identity: bool
    model: torch.nn.Module = field(repr=False)
    skipped: list[str] = field(default_factory=list)
    replaced: list[int] = field(default_factory=list)  # base layers given attention inside (C3k2 -> C3k2_CBAM)

    def __str__(self) -> str:
        def names(idx):
            return ", ".join(f"{i}: {self.model.model[i].type.rsplit('.', 1)[-1]}" for i in idx)

        state = "identity at init" if self.identity else "NOT identity at init"
        s = f"transferred {self.transferred}/{self.total} tensors from base; {self.new} new tensors initialised"
        where = [f"inserted layers {names(self.inserted)}"] * bool(self.inserted)
        where += [f"attention inside layers {names(self.replaced)}"] * bool(self.replaced)
        return s + (f" ({'; '.join(where)}; {state})" if where else "")


def _is_identity(m: torch.nn.Module) -> bool:
    g = getattr(getattr(m, "scale", None), "gamma", None)
    return isinstance(g, torch.Tensor) and bool((g == 0).all())


def _build_target(src, d: dict, identity: bool):
    """Build the inserted model dict ``d`` with the base ``src``'s class count (and scale, if ``d`` names none),
    with ``identity``: its inserted blocks written with ``init_values=0.0``. Returns ``(DetectionModel, layer map
    base index → new index)``."""
    from ultralytics.nn.tasks import DetectionModel

    m = layer_map(src.yaml, d, ("checkpoint", "model"))
    d["nc"] = src.yaml.get("nc", d.get("nc"))  # the base's classes (Ultralytics adapts the head to a dataset)
    if not d.get("scale") and src.yaml.get("scale"):
        d["scale"] = src.yaml["scale"]  # a YAML named without scale letter: build the base's scale
    if identity:
        for j in sorted(set(range(len(model_rows(d)))) - set(m.values())):
            row = model_rows(d)[j]
            row[3] = block_args(row[2], row[3][: param_index(row[2])], True)
        for i, j in m.items():
            if inner.replaces(model_rows(src.yaml)[i], row := model_rows(d)[j]):
                row[3] = inner.with_identity(row)
    return DetectionModel(d, verbose=False), m


def _matched_tensors(sd: dict, dst_sd: dict, m: dict[int, int]) -> tuple[dict, list[str]]:
    """The base's tensors ``sd`` under their new names (layer ``i`` → ``m[i]``) where the model ``dst_sd`` has that
    name and shape; and one line per tensor that does not fit."""
    load, skipped = {}, []
    for k, v in sd.items():
        mk = re.match(r"model\.(\d+)\.(.*)", k)
        nk = f"model.{m[int(mk.group(1))]}.{mk.group(2)}" if mk else k
        if nk in dst_sd and dst_sd[nk].shape == v.shape:
            load[nk] = v
        else:
            got = tuple(dst_sd[nk].shape) if nk in dst_sd else "missing"
            skipped.append(f"{k} {tuple(v.shape)} -> {nk} {got}")
    return load, skipped


def _report(src, dst, m: dict[int, int], total: int, n_dst: int, loaded: int, skipped: list[str]) -> TransferReport:
    """The ``TransferReport`` of weights moved from ``src`` into ``dst`` by the layer map ``m``."""
    inserted = sorted(set(range(len(dst.model))) - set(m.values()))
    replaced = [j for i, j in m.items() if inner.replaces(model_rows(src.yaml)[i], model_rows(dst.yaml)[j])]
    identity = (all(_is_identity(dst.model[j]) for j in inserted)
                and all(inner.is_identity(dst.model[j]) for j in replaced))
    return TransferReport(transferred=loaded, total=total, new=n_dst - loaded, layer_map=m, inserted=inserted,
                          identity=identity, model=dst, skipped=skipped, replaced=replaced)


def transfer(base, model, *, identity: bool = True, strict: bool = True, verbose: bool = True,
             trust: bool = False) -> TransferReport:
    """Load every tensor of the base model into the inserted model, each at its layer's new index.

    Args:
        base: the base checkpoint: a ``*.pt`` path, a checkpoint dict, a YOLO object or a DetectionModel. Its
            ``model.yaml`` must be the YAML the new model was made from by ``insert`` (same scale).
        model: the inserted model: a YAML path / model dict, or a ``YOLO`` with random weights (from a YAML or
            ``attn_yolo.insert``): built (a ``YOLO``: rebuilt in place) with the base's class count and names, and
            the base's scale if the YAML name has none; or a ``YOLO`` holding checkpoint weights, or a
            DetectionModel, loaded in place (it must have the base's class count).
        identity: for a model built here, write ``init_values=0.0`` into the inserted rows before building, so the
            blocks start as the identity. For a model loaded in place this cannot change anything; the report says
            whether its blocks are identity at init.
        strict: raise if a base tensor cannot be loaded (missing name or other shape); else skip and report it.
        verbose: log the report.
        trust: unpickle checkpoint files fully (may run code they contain); by default they load weights-only and a
            checkpoint referencing other classes is refused (``attn_yolo.checkpoint.load_yolo``).

    Returns:
        TransferReport: ``str(report)`` reads "transferred 499/499 tensors from base; 12 new tensors initialised ...";
        ``report.model`` is the DetectionModel the weights went into.

    Raises:
        InsertionError: unreadable or refused base (see ``trust``), fused base or model, a model that is not the base
            with blocks inserted, or (``strict``) a tensor of another shape, e.g. another scale or class count.
    """
    from ultralytics.engine.model import Model
    from ultralytics.nn.tasks import yaml_model_load
    from ultralytics.utils import LOGGER

    src = load_model(base, "base", InsertionError, suffixes=(".pt",), trust=trust)
    if getattr(src, "is_fused", lambda: False)():
        raise InsertionError("base: the model is fused for inference (no BatchNorm tensors); use its checkpoint file")
    yolo = model if isinstance(model, Model) else None
    fresh = (yolo is not None and isinstance(getattr(yolo.model, "yaml", None), dict)
             and api.holds_random_weights(yolo))  # random weights: from a YAML or insert()
    if isinstance(model, (str, Path, dict)) or fresh:  # built here, from its YAML, with the base's nc
        d = copy.deepcopy(yolo.model.yaml if fresh else model if isinstance(model, dict) else yaml_model_load(model))
        dst, m = _build_target(src, d, identity)
        if fresh:  # a YOLO with random weights (from a YAML or insert()): rebuilt, then it holds the transferred ones
            yolo.model = dst
    else:
        dst = load_model(model, "model", InsertionError, suffixes=(".pt",), trust=trust)
        m = layer_map(src.yaml, dst.yaml, ("checkpoint", "model"))
    if getattr(dst, "is_fused", lambda: False)():
        raise InsertionError("model: the model is fused for inference; transfer into an unfused model")

    if src.yaml.get("nc") != dst.yaml.get("nc") and strict:
        raise InsertionError(
            f"class count differs: base nc={src.yaml.get('nc')}, model nc={dst.yaml.get('nc')}; build the model with "
            f"the base's nc (pass the YAML path or dict to transfer, which does) and let training adapt the head"
        )
    sd, dst_sd = src.state_dict(), dst.state_dict()
    load, skipped = _matched_tensors(sd, dst_sd, m)
    if skipped and strict:
        raise InsertionError(
            f"{len(skipped)} of {len(sd)} base tensors do not fit the model (another scale, class count or base?): "
            + "; ".join(skipped[:3])
        )
    dst.load_state_dict(load, strict=False)
    src_names, dst_names = getattr(src, "names", None), getattr(dst, "names", None)
    if src_names and (not dst_names or len(src_names) == len(dst_names)):
        dst.names = dict(src_names)
    report = _report(src, dst, m, len(sd), len(dst_sd), len(load), skipped)
    if yolo is not None:  # train() then starts from these weights
        api.start_from(yolo, dst, str(report), replace=fresh)  # as Model.load does
    if verbose:
        LOGGER.info(f"attn-yolo: {report}")
        if identity and not report.identity:
            LOGGER.warning(
                "attn-yolo: the inserted blocks are not identity at init; insert with identity=True (or pass the YAML "
                "to transfer) to start from the base's predictions"
            )
    return report



