"""ONNX export of a model with attention blocks through Ultralytics' exporter, after checking the opset per block.

Export is Ultralytics' own exporter (``YOLO(model).export(format="onnx", ...)``; in 8.4.190 that is torch's
TorchScript-based ``torch.onnx.export(..., dynamo=False)``, default opset 18, then onnxslim if ``simplify``). Before it
runs, the model is scanned for attention blocks and the opset is checked against ``MIN_OPSET``, so an old opset fails
with the block's name, its layer and the minimum opset instead of an operator error from deep inside torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.checkpoint import load_yolo
from attn_yolo.files import check_out
from attn_yolo.nn.declaration import ULTRALYTICS_MIN_OPSET, LiveMapping, blocks
from attn_yolo.sdpa import is_fused

MIN_OPSET: LiveMapping = LiveMapping(
    lambda: {d.cls: (d.min_opset, d.opset_ops) for d in blocks(controls=False).values()}
)
"""Block class → (minimum ONNX opset, the ops that set it): the declarations' ``min_opset`` / ``opset_ops``. Checked
before exporting (``check_opset``); ``ULTRALYTICS_MIN_OPSET`` (9) is Ultralytics' own minimum (nearest ``Upsample``)."""
SDPA_MIN_OPSET = (14, "Ultralytics' Attention/AAttn fused (sdpa=True): scaled_dot_product_attention, as MHSA")


class OpsetError(ValueError):
    """The requested ONNX opset is older than a block in the model needs; names the block, layer and minimum."""


# --------------------------------------------------------------------------------------------------------------- opset
def block_min_opsets(model: torch.nn.Module) -> list[tuple[str, str, int, str]]:
    """Attention blocks in ``model`` with their minimum opset: ``[(block, where, min_opset, ops), ...]``.

    ``where`` is the Ultralytics layer (``"layer 11"``) holding the block, or its module path.
    """
    found = []
    for name, m in model.named_modules():
        need = [(cls.__name__, *v) for cls, v in MIN_OPSET.items() if isinstance(m, cls)]
        need += [(f"{type(m).__name__} (sdpa)", *SDPA_MIN_OPSET)] if is_fused(m) else []
        for block, opset, ops in need:
            layer = name.split(".")
            where = f"layer {layer[1]}" if len(layer) >= 2 and layer[0] == "model" and layer[1].isdigit() else name
            found.append((block, where or "model", opset, ops))
    return found


def default_opset() -> int:
    """The opset Ultralytics' exporter uses when none is given (``best_onnx_opset``: 18 with torch 2.14)."""
    import onnx
    from ultralytics.utils.export.engine import best_onnx_opset

    return best_onnx_opset(onnx)


def max_opset() -> int:
    """The newest opset the export can write: that of torch's TorchScript ONNX exporter (the one Ultralytics uses;
    20 in torch 2.14) or of the installed ``onnx`` package, whichever is older."""
    import onnx
    from torch.onnx import _constants

    return min(_constants.ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET, onnx.defs.onnx_opset_version())


def valid_opset(opset: int | None) -> int:
    """The effective opset (``default_opset()`` for None), checked against what Ultralytics and torch support.

    Raises:
        OpsetError: not an int, or outside ``ULTRALYTICS_MIN_OPSET..max_opset()``.
    """
    opset = default_opset() if opset is None else opset
    top = max_opset()
    if not isinstance(opset, int) or isinstance(opset, bool) or opset < 1:
        raise OpsetError(f"opset: {opset!r}; expected an int {ULTRALYTICS_MIN_OPSET}..{top}, or omit it")
    if opset < ULTRALYTICS_MIN_OPSET:
        raise OpsetError(f"opset={opset} is too old: Ultralytics' detect export needs opset >= {ULTRALYTICS_MIN_OPSET}")
    if opset > top:
        raise OpsetError(f"opset={opset} is newer than this export can write: allowed {ULTRALYTICS_MIN_OPSET}..{top} "
                         f"(torch {torch.__version__}'s TorchScript ONNX exporter, used by Ultralytics), or omit it")
    return opset


def check_opset(model: torch.nn.Module, opset: int | None) -> int:
    """Return the effective opset for exporting ``model``; raise ``OpsetError`` if a block needs a newer one.

    Raises:
        OpsetError: e.g. ``opset=13 is too old for MHSA (layer 11): it needs opset >= 14 (...)``, or an opset
            ``valid_opset`` rejects.
    """
    requested = opset
    opset = default_opset() if opset is None else opset
    if isinstance(opset, int) and not isinstance(opset, bool):
        need = [b for b in block_min_opsets(model) if opset < b[2]]
        if need:
            lines = "; ".join(f"{name} ({where}) needs opset >= {m}: {ops}" for name, where, m, ops in need)
            top = max(b[2] for b in need)
            raise OpsetError(f"opset={opset} is too old for this model: {lines}. Use opset>={top} (or omit opset).")
    return valid_opset(requested)


def default_onnx_path(yolo) -> Path:
    """Where Ultralytics' exporter writes the ``.onnx`` of ``yolo``: next to its ``.pt``; for a model built from a
    YAML, ``<yaml name>.onnx`` in the working directory."""
    file = api.model_file(yolo)
    return (Path(file.name) if file.suffix in (".yaml", ".yml") else file).with_suffix(".onnx")


# -------------------------------------------------------------------------------------------------------------- export
def export_onnx(
    model,
    imgsz: int | tuple[int, int] = 640,
    dynamic: bool = False,
    half: bool = False,
    opset: int | None = None,
    simplify: bool = True,
    *,
    out: str | Path | None = None,
    overwrite: bool = False,
    trust: bool = False,
) -> Path:
    """Export ``model`` (path or ``YOLO``) to ONNX with Ultralytics' exporter, after checking the opset.

    ``half=True`` is Ultralytics' ``quantize=16``: on CPU the exporter converts the fp32 graph to fp16 weights and
    activations with fp32 inputs and outputs (``onnxruntime.transformers.float16``, ``keep_io_types=True``), then
    ``toposort_onnx`` restores the node order ONNX requires. torch's thread count is restored afterwards.

    Args:
        out: the ``.onnx`` to write; None: where Ultralytics writes it (``default_onnx_path``: ``best.onnx`` next to
            ``best.pt``, whatever ``dynamic``/``half``), so give static and dynamic exports their own names.
        overwrite: replace an existing ``out``; otherwise it is refused before exporting.
        trust: unpickle a checkpoint path fully (may run code it contains); else weights-only.

    Returns:
        Path: the ``.onnx`` file.

    Raises:
        OpsetError: ``opset`` older than a block (or Ultralytics) needs, or newer than torch's exporter writes.
        FileExistsError: ``out`` exists and not ``overwrite``.
        ValueError: ``out`` not ``*.onnx``; a model path that does not load (see ``load_yolo``).
    """
    yolo = load_yolo(model, trust=trust)
    opset = check_opset(yolo.model, opset)
    out = Path(out) if out is not None else default_onnx_path(yolo)
    if out.suffix.lower() != ".onnx":
        raise ValueError(f"out={str(out)!r}: expected a *.onnx path")
    check_out(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    kw = {"quantize": 16} if half else {}
    threads = torch.get_num_threads()  # Ultralytics' select_device("cpu") resets it to its own NUM_THREADS
    try:
        with api.export_named(yolo, out.with_suffix(".pt")):  # the exporter then writes <out>.onnx
            f = yolo.export(format="onnx", imgsz=imgsz, dynamic=dynamic, opset=opset, simplify=simplify, device="cpu",
                            **kw)
    finally:
        torch.set_num_threads(threads)
    if half:
        toposort_onnx(f)
    return Path(f).resolve()


def toposort_onnx(path) -> bool:
    """Put the nodes of an ONNX graph in topological order, rewriting the file only if they were not; True if so.

    Ultralytics' CPU fp16 conversion (``float16.convert_float_to_float16(keep_io_types=True)``) appends the Cast of
    the graph input after the nodes that read it. ONNX requires topological order: ``onnx.checker`` rejects the file
    (onnxruntime sorts by itself and runs it). Sorting does not change the computation.
    """
    import onnx

    m = onnx.load(str(path))
    ready = {v.name for v in m.graph.input} | {t.name for t in m.graph.initializer} | {""}
    nodes = list(m.graph.node)
    pending, order = list(range(len(nodes))), []
    while pending:
        rest = []
        for k in pending:
            if all(i in ready for i in nodes[k].input):
                order.append(k)
                ready.update(nodes[k].output)
            else:
                rest.append(k)
        if len(rest) == len(pending):
            raise ValueError(f"{path}: graph has a cycle or a missing input at node {nodes[rest[0]].name!r}")
        pending = rest
    if order == sorted(order):
        return False
    sorted_nodes = [onnx.NodeProto.FromString(nodes[k].SerializeToString()) for k in order]
    del m.graph.node[:]
    m.graph.node.extend(sorted_nodes)
    onnx.save(m, str(path))
    return True


def onnx_info(onnx_path) -> dict:
    """How an ONNX file was exported: opset, dynamic axes, precision (fp16 if a weight is), export size, stride.

    Raises:
        ValueError: the file is not an ONNX model with an image input ``(B, 3, H, W)``.
    """
    import onnx

    try:
        m = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as e:  # google.protobuf DecodeError, or onnx's own errors
        raise ValueError(f"{str(onnx_path)!r} is not an ONNX model file: {type(e).__name__}: {e}") from None
    if not m.graph.input or len(m.graph.input[0].type.tensor_type.shape.dim) != 4:
        raise ValueError(f"{str(onnx_path)!r} is not an ONNX detection model: expected an image input (B, 3, H, W)")
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dynamic = any(d.dim_param or not d.dim_value for d in dims)
    meta = {p.key: p.value for p in m.metadata_props}
    if "imgsz" in meta:  # Ultralytics' metadata
        imgsz = [int(v) for v in json.loads(meta["imgsz"])]
    else:
        imgsz = [dims[2].dim_value or 640, dims[3].dim_value or 640]
    fp16 = any(t.data_type == onnx.TensorProto.FLOAT16 for t in m.graph.initializer)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    stride = int(meta.get("stride", 32))
    precision = "fp16" if fp16 else "fp32"
    return {"opset": opset, "dynamic": dynamic, "precision": precision, "imgsz": imgsz, "stride": stride}
