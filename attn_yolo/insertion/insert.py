"""``insert`` and ``insert_dict``: attention blocks into a detect model YAML, returned as a model dict or a ``YOLO``.

Insertion::

    attn-yolo insert base=yolo11n.yaml module=CBAM at=backbone                  # writes yolo11n-cbam.yaml
    attn-yolo insert base=yolov8s.yaml module=SE,MHSA at=backbone,sppf args=[[16],[4]] out=models/yolov8s-se-mhsa.yaml
    attn-yolo insert base=yolo11n.yaml module=CBAM at=4,6,10 pretrained=base.pt   # + yolo11n-cbam.pt, weights carried

    >>> import attn_yolo
    >>> model = attn_yolo.insert("yolo11n.yaml", "CBAM", at="backbone", args=[16, 7])   # an Ultralytics YOLO
    >>> model.train(data="path/to/data.yaml", epochs=10)
    >>> d = attn_yolo.insertion.insert_dict("yolo11n.yaml", "CBAM")   # the model dict only, as yaml_model_load's
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from attn_yolo import ultralytics_api as api
from attn_yolo.files import check_out
from attn_yolo.insertion.base import InsertionError
from attn_yolo.insertion.plan import check_build, default_out, make_plan
from attn_yolo.insertion.yaml_text import write_yaml, yaml_text


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
    d, plan = make_plan(base, module, at, args, identity)
    if check:
        check_build(d, plan)
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
    api.hold_in_memory(yolo, name)
    return yolo
