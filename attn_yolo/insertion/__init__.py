"""The ``attn-yolo insert`` command: attention into a detect YAML, with weights carried (``weights``).

``base`` loads the base model, ``sites`` resolves ``at=``, ``blocks`` writes each block's YAML args, ``plan`` places the
blocks and remaps every ``from`` index, ``yaml_text`` writes the YAML, ``insert`` is the Python API (``insert``,
``insert_dict``), ``layer_map`` matches base layers to new ones and ``weights`` carries the weights by layer.
"""

from __future__ import annotations

import sys
from pathlib import Path

from attn_yolo.args import Key, Schema, UsageError
from attn_yolo.checkpoint import load_model, save_checkpoint
from attn_yolo.files import check_out, check_writable
from attn_yolo.insertion.base import InsertionError, load_base, model_rows
from attn_yolo.insertion.blocks import describe_args, module_class
from attn_yolo.insertion.insert import insert, insert_dict
from attn_yolo.insertion.layer_map import layer_map
from attn_yolo.insertion.plan import check_build, default_out, make_plan
from attn_yolo.insertion.weights import TransferReport, transfer
from attn_yolo.insertion.yaml_text import write_yaml
from attn_yolo.nn.common import AttnBuildError

__all__ = ["InsertionError", "TransferReport", "insert", "insert_dict", "layer_map", "load_base", "main",
           "module_class", "save_checkpoint", "transfer", "write_yaml"]


# ------------------------------------------------------------------------------------------------------------- CLI

SCHEMA = Schema([
    Key("base", "str", help="path or Ultralytics name of a detect YAML (yolo11n.yaml, yolov8s.yaml, yolo26m.yaml)",
        required=", e.g. base=yolo11n.yaml (see `attn-yolo insert help`)"),
    Key("module", "any", "CBAM", help="block name(s): CBAM, SE,MHSA, or a block inside the base's rows: C3k2_CBAM"),
    Key("at", "any", "backbone", help="backbone | sppf | neck | layer indices (4,6,10); one per module"),
    Key("args", "any", help="block hyperparameters, e.g. [16,7]; per module [[16],[4]]; default: the paper's"),
    Key("identity", "bool", help="write init_values=0.0 so blocks start as the identity; default: True with "
        "pretrained=, else False"),
    Key("out", "path", help="output YAML; default <base stem>-<modules>.yaml"),
    Key("overwrite", "bool", False, help="replace existing outputs"),
    Key("pretrained", "path", help="base checkpoint (*.pt) to carry into the new model"),
    Key("out_weights", "path", help="checkpoint written with pretrained=; default: out with .pt"),
    Key("trust", "bool", False, help="unpickle pretrained= fully (may run code it contains); else weights-only"),
])
"""``attn-yolo insert`` keys."""
DEFAULTS = SCHEMA.defaults()

HELP = """attn-yolo insert key=value ...   insert attention blocks into a detect YAML, optionally carrying weights over

  base=        path or Ultralytics name of a detect YAML (yolo11n.yaml, yolov8s.yaml, yolo26m.yaml)   [required]
  module=      CBAM | SE | ECA | SAM | MHSA | ..., or several: module=SE,MHSA                         [CBAM]
               or a block inside the base's own rows: C3k2_CBAM (yolo11/26), C2f_CBAM (yolov8), SPPF_ECA
  at=          backbone | sppf | neck | layer indices (at=4,6,10); one per module: at=backbone,sppf   [backbone]
  args=        block hyperparameters, e.g. args=[16,7]; per module: args=[[16],[4]]                   [defaults]
  identity=    write init_values=0.0 so blocks start as the identity    [True with pretrained=, else False]
  out=         output YAML                                              [<base stem>-<modules>.yaml]
  overwrite=   replace existing outputs                                 [False]
  pretrained=  base checkpoint (*.pt) to carry into the new model (its nc is written into out=)
  out_weights= checkpoint written with pretrained=                      [out with .pt]
  trust=       unpickle pretrained= fully (may run code it contains); else weights-only  [False]

Example: attn-yolo insert base=yolo11n.yaml module=CBAM at=backbone pretrained=base.pt
         attn-yolo train model=yolo11n-cbam.pt data=coco128.yaml"""


def stacked(d: dict, plan) -> list[str]:
    """One warning per inserted block that follows the same block (CBAM right after CBAM): the YAML already had it
    there, or the same module was inserted twice at one site."""
    from attn_yolo.registry import canonical

    rows = model_rows(d)
    return [f"row {b.index}: {b.name} right after {b.name} (row {b.index - 1}): the block is stacked on itself; "
            f"if the base already has {b.name} there, this inserts a second one"
            for b in plan.blocks if b.index > 0 and canonical(rows[b.index - 1][2]) == b.name]


def main(argv: list[str]) -> int:
    """``attn-yolo insert key=value ...``: see ``HELP``."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(HELP)
        return 0
    a = SCHEMA.parse(argv, "insert")
    pretrained = a["pretrained"]
    identity = bool(pretrained) if a["identity"] is None else a["identity"]
    if a["out_weights"] and not pretrained:
        raise UsageError("attn-yolo insert: out_weights= needs pretrained=<base checkpoint .pt>")
    try:
        d, plan = make_plan(str(a["base"]), a["module"], a["at"], a["args"], identity)
        out = Path(a["out"] or default_out(plan.base, plan.blocks))
        weights = Path(a["out_weights"] or out.with_suffix(".pt")) if pretrained else None
        for p, key in ((out, "out"), (weights, "out_weights")):
            if p is not None:
                check_out(p, a["overwrite"], key, InsertionError)
                check_writable(p, key, InsertionError)
        src = load_model(pretrained, "pretrained", InsertionError, (".pt",), trust=a["trust"]) if pretrained else None
        check_build(d, plan)
        d["yaml_file"] = str(out)
        try:
            report = transfer(src, d, identity=identity, verbose=False) if pretrained else None
        except InsertionError as e:  # the checkpoint is not a model of base=: say which file
            raise InsertionError(f"pretrained={str(pretrained)!r} is not a checkpoint of base={str(a['base'])!r}, so "
                                 f"its weights cannot be carried over: {e}; give the base's own weights, or the base= "
                                 "its weights were trained from") from None
        if report is not None:
            d["nc"] = report.model.yaml["nc"]  # the YAML describes the checkpoint: the base's class count
        write_yaml(d, plan, out, overwrite=a["overwrite"])
        if report is not None:
            report.model.yaml["yaml_file"] = str(out)
            save_checkpoint(report.model, weights, overwrite=a["overwrite"], note=str(report), error=InsertionError)
    except InsertionError as e:
        raise UsageError(f"attn-yolo insert: {e}") from None
    except AttnBuildError as e:  # from transfer's build
        raise UsageError(f"attn-yolo insert: the inserted model does not build: {e}") from None

    for row in stacked(d, plan):
        print(f"attn-yolo insert: warning: {row}", file=sys.stderr)
    for b in plan.blocks:
        lvl = plan.level(b.after)
        how = f"in place of the {b.replaced} of" if b.replaced else "after"
        print(f"{b.name} [{describe_args(b.name, b.args)}] {how} base layer {b.after}{f' ({lvl})' if lvl else ''}"
              f" -> layer {b.index}")
    det = model_rows(d)[-1]
    print(f"{det[2]} reads layers {det[0]} (base {plan.base_detect})")
    print(f"wrote {out}")
    if report is not None:
        print(report)
        print(f"wrote {weights}  (train: attn-yolo train model={weights} data=...)")
    return 0

