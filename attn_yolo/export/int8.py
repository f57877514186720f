"""INT8 export through Ultralytics' exporter (``quantize=8``), with a keep-float list per attention block.

Two backends, ONNX Runtime static QDQ and OpenVINO NNCF, both calibrated on the model's own training images.

Ultralytics 8.4.190 quantizes by fixed rules that know nothing of attention: ONNX (``quantize_static``, QDQ) quantizes
Conv, Gemm and MatMul and keeps every other node float; OpenVINO (``nncf.quantize``, ``preset=MIXED``) keeps every
Sigmoid and the head's DFL float. What INT8 still does to a gate or an attention row is round the tensors that make
it: the logits a gate's sigmoid squashes come out of an INT8 conv, and the softmax weights are multiplied with V in
an INT8 MatMul. The keep-float list (``keep_float_scopes``) is derived from each block's declaration: every gate it
applies (its declaration's ``gates``) and, for a block with explicit attention weights (``attention_weights``), its
softmax. In a graph (``keep_float_nodes``) a gate keeps float the weighted nodes that produce its input (walked back
inside the block, through element-wise ops, which are kept too: OpenVINO would quantize an Add's inputs, the logits),
the gate itself and the product applying it; a softmax also keeps the weighted node its rows feed (the AV MatMul)
and the nodes between. Everything else is quantized as Ultralytics does.

Calibration: ``fraction`` of the training split (``split=train``) of the dataset the model was trained on
(``train_args["data"]`` of the checkpoint) unless ``data=`` is given; ``fraction=1.0`` (Ultralytics' default) takes
every training image, an int > 1 that many. Ultralytics recommends at least 300.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.nn.declaration import Declaration
from attn_yolo.progress import bar
from attn_yolo.ultralytics_api.int8 import calibration_progress, extra_float

SQUASH = {"onnx": {"Sigmoid", "Softmax", "HardSigmoid"}, "openvino": {"Sigmoid", "SoftMax", "Softmax", "HSigmoid"}}
"""Op types of a gate's or an attention row's squashing function, per graph kind."""
FUSED_ATTENTION = {"ScaledDotProductAttention"}
"""OpenVINO's fused attention op (torch's SDPA converts to it): QKᵀ, softmax and AV in one op, kept float whole."""
WEIGHTED = {"onnx": {"Conv", "ConvTranspose", "Gemm", "MatMul"},
            "openvino": {"Convolution", "GroupConvolution", "ConvolutionBackpropData", "MatMul"}}
"""Op types INT8 quantizes with weights (or two activations, MatMul), per graph kind."""
INT8_FORMATS = ("onnx", "openvino")
"""Formats with an INT8 path here: ONNX Runtime static QDQ, OpenVINO NNCF."""


class Int8Error(ValueError):
    """Bad INT8 input found before any heavy work (no calibration images, a dataset that is not at hand)."""


# ------------------------------------------------------------------------------------------------- keep-float list
def _scopes(model: torch.nn.Module) -> list[tuple[str, str, str]]:
    """``[(module path, block path, why)]``, from each block's declaration (``gates``, ``attention_weights``)."""
    out = []
    for name, m in model.named_modules():
        decl = getattr(type(m), "declaration", None)
        if not isinstance(decl, Declaration):
            continue
        for p in decl.gates:
            g = m.get_submodule(p)
            why = f"{type(m).__name__} gate {p} ({type(g).__name__}): its input's producers, the gate, its product"
            out.append((f"{name}.{p}" if name else p, name, why))
        if decl.attention_weights:
            out.append((name, name, f"{type(m).__name__} attention weights: softmax(QKᵀ/√d), its QKᵀ and AV products"))
    return out


def keep_float_scopes(model: torch.nn.Module) -> list[tuple[str, str]]:
    """The keep-float list of ``model``: ``[(module path, why)]``, one entry per gate of every block (its
    declaration's ``gates``) and one per block with explicit attention weights (``attention_weights``: MHSA). E.g. for
    yolo11n + CBAM at layer 5: ``("model.5.channel.gate", "CBAM gate channel.gate (Sigmoid): ...")``."""
    return [(p, why) for p, _, why in _scopes(model)]


@dataclass
class Graph:
    """A dataflow graph reduced to what the keep-float walk needs: per node, its op type, producers and consumers."""

    kind: str  # onnx | openvino
    op: dict[str, str]
    producers: dict[str, list[str]]
    consumers: dict[str, list[str]]

    def in_scope(self, node: str, path: str) -> bool:
        """Whether ``node`` belongs to module ``path`` (``model.5.channel.gate``), by the exporter's scope names."""
        if self.kind == "openvino":  # "__module.model.5.channel.gate/aten::sigmoid/Sigmoid"
            head = node.removeprefix("__module.").split("/")[0]
            return head == path or head.startswith(path + ".")
        return _onnx_in_scope(node, path)


def _onnx_in_scope(node: str, path: str) -> bool:
    """torch's TorchScript ONNX names: ``/model.5/channel/mlp/mlp.0/Conv`` for module ``model.5.channel.mlp.0`` (a
    container's child is ``<container>.<index>``, a second call adds ``_1``; a container called as a module adds
    its own scope). The path's tokens must appear in order from the first scope on, extra scopes allowed."""
    import re

    parts, tokens = path.split("."), []
    for p in parts:
        if p.isdigit() and tokens:
            tokens[-1] = f"{tokens[-1]}.{p}"
        else:
            tokens.append(p)
    segs = [re.sub(r"_\d+$", "", s) for s in node.strip("/").split("/")[:-1]]
    if not segs or segs[0] != tokens[0]:
        return False
    i = 0
    for s in segs:
        if i < len(tokens) and s == tokens[i]:
            i += 1
    return i == len(tokens)


def onnx_graph(path) -> Graph:
    """The ``Graph`` of an ``.onnx`` file (node names as in the file)."""
    import onnx

    g = onnx.load(str(path), load_external_data=False).graph
    made = {o: n.name for n in g.node for o in n.output}
    op = {n.name: n.op_type for n in g.node}
    prod = {n.name: [made[i] for i in n.input if i in made] for n in g.node}
    return Graph("onnx", op, prod, _consumers(prod))


def openvino_graph(model) -> Graph:
    """The ``Graph`` of an ``ov.Model`` (op friendly names)."""
    op, prod = {}, {}
    for o in model.get_ordered_ops():
        name = o.get_friendly_name()
        op[name] = o.get_type_name()
        prod[name] = [i.get_source_output().get_node().get_friendly_name() for i in o.inputs()]
    return Graph("openvino", op, prod, _consumers(prod))


def _consumers(prod: dict[str, list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {n: [] for n in prod}
    for n, ps in prod.items():
        for p in ps:
            out.setdefault(p, []).append(n)
    return out


def _walk(g: Graph, start: str, block: str, step: dict[str, list[str]]) -> set[str]:
    """Weighted nodes reached from ``start`` along ``step`` (producers or consumers) through unweighted nodes of
    ``block``, and the unweighted nodes passed (a gate's logits summed in an ``Add``: left out, OpenVINO quantizes
    the Add's inputs, the logits themselves)."""
    seen, stack, out = {start}, list(step.get(start, [])), set()
    while stack:
        n = stack.pop()
        if n in seen or not g.in_scope(n, block) or g.op.get(n) in ("Constant", "Parameter", "Initializer"):
            continue
        seen.add(n)
        out.add(n)
        if g.op.get(n) not in WEIGHTED[g.kind]:
            stack += step.get(n, [])
    return out


def keep_float_nodes(g: Graph, scopes: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """``{module path: graph nodes kept float}`` for each keep-float scope (``_scopes``): each squashing node in the
    scope, the weighted nodes producing its input (inside the block) and the nodes between, its direct consumers (the
    gate's product) and, for a softmax, the weighted nodes it feeds (AV) and the nodes between; OpenVINO's fused
    ``ScaledDotProductAttention`` of an attention scope, alone. A scope without a squashing node (an Identity gate:
    LSKA's and MLCA's unsquashed maps) keeps nothing."""
    out = {}
    for path, block, _ in scopes:
        keep = set()
        for n, t in g.op.items():
            if t in FUSED_ATTENTION and path == block and g.in_scope(n, path):
                keep.add(n)  # its inputs are Q, K, V: the projections before it stay quantized
            if t not in SQUASH[g.kind] or not g.in_scope(n, path):
                continue
            keep |= {n, *g.consumers.get(n, [])} | _walk(g, n, block, g.producers)
            if t.lower() == "softmax":
                keep |= _walk(g, n, block, g.consumers)
        out[path] = sorted(keep)
    return out


# --------------------------------------------------------------------------------------------------- calibration
def calibration_data(yolo, data=None) -> tuple[str, int, int]:
    """The dataset to calibrate and validate on: ``data`` (``synthetic``: the embedded dataset) or the one the model
    was trained on; returns ``(data YAML, training images, validation images)``.

    Raises:
        Int8Error: no dataset given or recorded, not at hand (nothing is downloaded), or no training/val images.
    """
    from ultralytics.data.utils import check_det_dataset

    from attn_yolo.images import model_dataset, split_files

    src = "data=" if data is not None else "the model's training dataset (train_args['data'])"
    data = model_dataset(yolo) if data is None else str(data)
    if data is None:
        raise Int8Error("no calibration images: the model records no training dataset; pass data=<dataset.yaml>")
    if data == "synthetic":
        from attn_yolo.synthetic import default_data_yaml

        data = str(default_data_yaml())
    try:
        info = check_det_dataset(data, autodownload=False)
        n = {s: len(split_files(info, s)) for s in ("train", "val")}
    except Exception as e:  # noqa: BLE001  Ultralytics' own message (missing YAML, missing images)
        first = " ".join(str(e).split())[:200]
        raise Int8Error(f"no calibration images: {src} {data!r} is not at hand ({type(e).__name__}: {first})") from None
    for s, k in n.items():
        if not k:
            raise Int8Error(f"no calibration images: {src} {data!r} has no {s} images")
    return data, n["train"], n["val"]


def calibration_count(n_train: int, fraction) -> int:
    """Calibration images for ``fraction`` (Ultralytics' reading: a float share of the split, an int > 1 a count)."""
    if isinstance(fraction, int) and not isinstance(fraction, bool) and fraction > 1:
        return min(fraction, n_train)
    return max(1, round(n_train * float(fraction)))


# ---------------------------------------------------------------------------------------------------------- export
def export_int8(yolo, fmt: str, imgsz, data: str, fraction=1.0, keep_float: bool = False, out=None,
                overwrite: bool = False, keep_head: bool = False) -> tuple[Path, dict]:
    """Export ``yolo`` to INT8 with Ultralytics' exporter (``quantize=8``, ``split=train``), static, on CPU.

    Args:
        fmt: ``onnx`` (ONNX Runtime static QDQ) or ``openvino`` (NNCF).
        data: the dataset YAML (``calibration_data``); its training split calibrates.
        fraction: Ultralytics' ``fraction`` of the training split (default 1.0: all).
        keep_float: also keep the nodes of ``keep_float_scopes`` float.
        keep_head: also keep float the detection head's own ops (``attn_yolo.export.end2end.head_decode_nodes``: an
            end-to-end head's decode and top-k), under the key ``"head"`` of the returned ``kept``.
        out: the ``.onnx`` / ``*_openvino_model`` folder; None: Ultralytics' name next to the checkpoint
            (``best_int8.onnx``, ``best_int8_openvino_model/``).

    Returns:
        ``(file, kept)``: the ``.onnx`` or the IR's ``.xml``, and ``{module path: nodes kept float}``.

    Raises:
        FileExistsError: ``out`` exists and not ``overwrite``.
    """
    from attn_yolo.export.openvino_export import SUFFIX, openvino_xml
    from attn_yolo.files import check_out

    out = Path(out) if out is not None else default_int8_path(yolo, fmt)
    check_out(out, overwrite)
    scopes = _scopes(yolo.model) if keep_float else []
    kept: dict = {}

    def nodes(g):
        kept.update(keep_float_nodes(g, scopes))
        if keep_head:
            from attn_yolo.export.end2end import head_decode_nodes

            kept["head"] = head_decode_nodes(g, yolo.model)
        return sorted({n for v in kept.values() for n in v})

    threads = torch.get_num_threads()  # Ultralytics' select_device("cpu") resets it
    with tempfile.TemporaryDirectory(prefix="attn-yolo-int8-") as tmp:
        try:
            with api.export_named(yolo, Path(tmp) / "model.pt"), calibration_progress(calibration_bar), \
                    extra_float(lambda f: nodes(onnx_graph(f)), lambda m: nodes(openvino_graph(m))):
                f = Path(yolo.export(format=fmt, imgsz=imgsz, quantize=8, data=data, fraction=fraction, split="train",
                                     batch=1, dynamic=False, device="cpu"))
        finally:
            torch.set_num_threads(threads)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "onnx":
            shutil.move(str(f), out)
            return out.resolve(), kept
        xml, stem = openvino_xml(f), out.name[: -len(SUFFIX)]
        for ext in (".xml", ".bin"):
            xml.with_suffix(ext).rename(xml.with_name(stem + ext))
        shutil.move(str(f), out)
        return openvino_xml(out).resolve(), kept


def calibration_bar(loader, n: int):
    """The calibration batches under a progress bar (one terminal line; silent elsewhere)."""
    return bar(loader, "INT8 calibration", total=n, unit="batch")


def default_int8_path(yolo, fmt: str) -> Path:
    """Ultralytics' INT8 names next to the checkpoint: ``best_int8.onnx``, ``best_int8_openvino_model/``."""
    from attn_yolo.export.openvino_export import SUFFIX

    file = api.model_file(yolo)
    file = Path(file.name) if file.suffix in (".yaml", ".yml") else file
    return file.with_name(f"{file.stem}_int8" + (".onnx" if fmt == "onnx" else SUFFIX))
