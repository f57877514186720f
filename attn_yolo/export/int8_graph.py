"""What ran in INT8, per attention block and backend, read from the exported graph and the runtime's own graph.

Both graphs are read, the exported INT8 one and the one the runtime executes; the quantizer's rules are not.

* **ONNX Runtime** (static QDQ ``.onnx``): in the file, an op is *inside QDQ* when every data input arrives through
  a ``DequantizeLinear`` and (for an op without weights) every output goes into a ``QuantizeLinear``, ONNX Runtime's
  QDQ node unit. What runs is read from ONNX Runtime's own graph after its QDQ fusions (the CPU provider at
  ``ORT_ENABLE_EXTENDED``, saved with ``optimized_model_filepath``): a node that became a quantized kernel
  (``QLinearConv``, ``QLinearMatMul``, ``QGemm``, ``QLinearSoftmax``, ``MatMulIntegerToFloat``, ...) ran in INT8;
  one that is still a float op ran in float (it reads dequantized values). A fused node keeps its original name.
* **OpenVINO** (NNCF IR): the IR is compiled for the CPU plugin as the verification runs it (f32 inference,
  ``attn_yolo.export.runtime.OpenVINORuntime``) and each op of ``compiled.get_runtime_model()`` carries the original
  ops it executes (rt_info ``originalLayersNames``) and its ``runtimePrecision`` (the precision of its inputs:
  ``u8``/``i8`` is INT8). An original op that is the runtime node's own op runs at that precision; one fused into
  another node as a post-op (a Sigmoid after a Convolution) runs in float on that node's output. A Snippets
  ``Subgraph`` is one kernel over many ops (OpenVINO's fused attention; a gate with its group norm and products), and
  its ``u8`` says only that some of its inputs are 8-bit: an op in it ran on 8-bit data when a ``FakeQuantize`` of
  the IR lies upstream of it on a data path inside the subgraph or at its border (Q, K, V of fused attention), else
  in float (a gate whose logits come from a float conv, in a subgraph whose other input, the residual, is 8-bit).

Ops are grouped per attention block (each module whose class has a ``Declaration``) by the exporters' scope names
(``attn_yolo.export.int8.Graph.in_scope``), and given a *role*: ``gate`` (the squashing op of a declared gate),
``attention MatMul`` (a MatMul of two activations: QKᵀ, AV), ``softmax`` (also OpenVINO's fused
``ScaledDotProductAttention``), ``pooling`` (pooling and reductions: the pooled descriptors of channel and spatial
attention), ``conv`` and ``linear`` (weighted ops). Other ops (element-wise, reshapes) are not listed.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from attn_yolo.export.int8 import Graph, onnx_graph, openvino_graph
from attn_yolo.nn.declaration import Declaration

ROLES = ("gate", "attention MatMul", "softmax", "pooling", "conv", "linear")
"""The roles reported per block, in report order."""
POOLING = {"onnx": {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceMax",
                    "ReduceSum", "LpPool"},
           "openvino": {"MaxPool", "AvgPool", "AdaptiveAvgPool", "AdaptiveMaxPool", "ReduceMean", "ReduceMax",
                        "ReduceSum"}}
CONV = {"onnx": {"Conv", "ConvTranspose"}, "openvino": {"Convolution", "GroupConvolution", "ConvolutionBackpropData"}}
MATMUL = {"onnx": {"MatMul", "Gemm"}, "openvino": {"MatMul"}}
SQUASH = {"onnx": {"Sigmoid", "HardSigmoid"}, "openvino": {"Sigmoid", "HSigmoid"}}
SOFTMAX = {"onnx": {"Softmax"}, "openvino": {"Softmax", "SoftMax", "ScaledDotProductAttention"}}
INT8_PRECISIONS = {"u8", "i8"}
"""OpenVINO runtime precisions that are INT8."""
MOVES = {"Reshape", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "VariadicSplit", "StridedSlice", "Slice",
         "Gather"}
"""OpenVINO ops that move values without computing: 8-bit data passes through them unchanged."""


@dataclass
class OpPrecision:
    """One op of an attention block in an INT8 export, and the precision it ran in.

    ``block``: the block's module path (``model.5``) and ``block_type`` its class; ``role`` one of ``ROLES``;
    ``node`` the op's name in the exported graph, ``op`` its type there; ``int8``: whether it ran in INT8; ``runs_as``
    what the runtime executes (ONNX Runtime: its kernel, ``QLinearConv``; OpenVINO: ``Convolution u8`` or
    ``fused into Convolution (u8), f32 post-op``); ``qdq`` (ONNX only): inside a QDQ pair in the file."""

    backend: str  # onnxruntime | openvino
    block: str
    block_type: str
    role: str
    node: str
    op: str
    int8: bool
    runs_as: str
    qdq: bool | None = None


def attention_blocks(model) -> list[tuple[str, str, tuple[str, ...]]]:
    """``[(module path, class name, gate paths)]`` of every declared attention block in ``model`` (the Detect
    model, ``yolo.model``); gate paths are the module paths of the declaration's ``gates``."""
    out = []
    for name, m in model.named_modules():
        decl = getattr(type(m), "declaration", None)
        if isinstance(decl, Declaration) and name:
            out.append((name, type(m).__name__, tuple(f"{name}.{g}" for g in decl.gates)))
    return out


def _const(g: Graph, node: str, consts: set[str], seen: dict | None = None) -> bool:
    """Whether ``node`` computes from constants only (a weight, possibly dequantized, reshaped or transposed)."""
    seen = {} if seen is None else seen
    if node in consts:
        return True
    if node in seen:
        return seen[node]
    seen[node] = False
    if g.op.get(node) in ("Constant",):
        seen[node] = True
    elif g.op.get(node) in ("Parameter",) or not g.producers.get(node):
        seen[node] = False
    else:
        seen[node] = all(_const(g, p, consts, seen) for p in g.producers[node])
    return seen[node]


def role(g: Graph, node: str, gates: tuple[str, ...], weights: dict[str, list[bool]]) -> str | None:
    """The role of ``node`` (``ROLES``) in graph ``g`` or None; ``weights``: per node, which inputs are constant."""
    t, k = g.op[node], g.kind
    if t in SQUASH[k]:
        return "gate" if any(g.in_scope(node, p) for p in gates) else None
    if t in SOFTMAX[k]:
        return "softmax"
    if t in POOLING[k]:
        return "pooling"
    if t in CONV[k]:
        return "conv"
    if t in MATMUL[k]:
        return "linear" if any(weights.get(node, [])) else "attention MatMul"
    return None


def _block_ops(g: Graph, model, weights: dict[str, list[bool]]) -> list[tuple[str, str, str, str]]:
    """``[(block path, block type, role, node)]`` of every listed op of every attention block in ``g``."""
    out = []
    for path, kind, gates in attention_blocks(model):
        for n in g.op:
            if g.in_scope(n, path) and (r := role(g, n, gates, weights)) is not None:
                out.append((path, kind, r, n))
    return out


# ---------------------------------------------------------------------------------------------------- ONNX Runtime
ORT_INT8_KERNELS = ("QLinear", "QGemm", "Integer", "QAttention", "QOrdered", "DynamicQuantize")
"""ONNX Runtime op types that compute on 8-bit inputs (a prefix or a part of the name: ``QLinearConv``,
``MatMulIntegerToFloat``, ``ConvInteger``)."""


def ort_runtime_ops(path) -> tuple[dict[str, str], dict[str, str]]:
    """``({node name: op type}, {output tensor: node name})`` of the graph ONNX Runtime's CPU provider runs for
    ``path`` after its QDQ fusions (``ORT_ENABLE_EXTENDED``, written with ``optimized_model_filepath`` to a temporary
    file)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="attn-yolo-ort-opt-") as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        g = onnx.load(so.optimized_model_filepath, load_external_data=False).graph
        return {n.name: n.op_type for n in g.node}, {o: n.name for n in g.node for o in n.output}


def _ort_node(node: str, outputs: list[str], ops: dict[str, str], made: dict[str, str]) -> str | None:
    """The node ONNX Runtime runs for the file's ``node``: itself (a QDQ fusion keeps the name), the fused node named
    after it (``<node>/MatMulScaleFusion/``) or the one that now makes its output (a Sigmoid fused into its Conv)."""
    if node in ops:
        return node
    named = [n for n in ops if n.startswith(node + "/")]
    if named:
        return named[0]
    return next((made[o] for o in outputs if o in made), None)


def onnx_precisions(path, model) -> list[OpPrecision]:
    """Per attention block of ``model``, the listed ops (module docstring) of the INT8 ``.onnx`` at ``path``, whether
    each sits inside a QDQ pair in the file and what ONNX Runtime runs it as."""
    import onnx

    g = onnx_graph(path)
    gp = onnx.load(str(path), load_external_data=False).graph
    consts = {i.name for i in gp.initializer}
    made = {o: n.name for n in gp.node for o in n.output}
    inputs = {n.name: [i for i in n.input if i] for n in gp.node}
    outputs = {n.name: list(n.output) for n in gp.node}
    for n in gp.node:  # tensors computed from initializers only (a dequantized, reshaped weight)
        if n.op_type == "Constant" or (inputs[n.name] and all(i in consts for i in inputs[n.name])):
            consts.update(n.output)
    weights = {n: [i in consts for i in ins] for n, ins in inputs.items()}
    users: dict[str, list[str]] = {}
    for n, ins in inputs.items():
        for i in ins:
            users.setdefault(i, []).append(n)
    ops, makers = ort_runtime_ops(path)
    rows = []
    for path_, kind, r, n in _block_ops(g, model, weights):
        data = inputs[n][:2] if g.op[n] in CONV["onnx"] | MATMUL["onnx"] else [i for i in inputs[n] if i not in consts]
        dq_in = bool(data) and all(i in made and g.op[made[i]] == "DequantizeLinear" for i in data)
        q_out = all(users.get(o) and all(g.op[u] == "QuantizeLinear" for u in users[o]) for o in outputs[n])
        qdq = dq_in and (q_out or g.op[n] in CONV["onnx"] | MATMUL["onnx"])
        node = _ort_node(n, outputs[n], ops, makers)
        runs = ops[node] if node is not None else None
        int8 = runs is not None and any(k in runs for k in ORT_INT8_KERNELS)
        how = "removed by ONNX Runtime" if node is None else runs if node == n else f"fused into {runs} ({node})"
        rows.append(OpPrecision("onnxruntime", path_, kind, r, n, g.op[n], int8, how, qdq))
    return rows


# -------------------------------------------------------------------------------------------------------- OpenVINO
def openvino_runtime_ops(xml) -> dict[str, tuple[str, str, str, bool]]:
    """``{original op name: (runtime node, its layer type, its runtimePrecision, main)}`` of the IR at ``xml``
    compiled for the CPU plugin as the verification runs it (``OpenVINORuntime``: f32 inference); ``main``: the op
    is the runtime node's own (its friendly name, or a suffix of it), or the node is a Snippets ``Subgraph`` (one
    kernel reading the subgraph's inputs: 8-bit inputs reach every op fused in it), else a fused post-op."""
    from attn_yolo.export.runtime import OpenVINORuntime

    compiled = OpenVINORuntime(xml).compiled
    out = {}
    for o in compiled.get_runtime_model().get_ordered_ops():
        info = o.get_rt_info()
        names = info["originalLayersNames"].astype(str).split(",") if "originalLayersNames" in info else []
        node, kind, prec = o.get_friendly_name(), info["layerType"].astype(str), info["runtimePrecision"].astype(str)
        for n in (n for n in names if n):
            out.setdefault(n, (node, kind, prec, n == node or node.startswith(n + "/") or kind == "Subgraph"))
    return out


def openvino_precisions(xml, model) -> list[OpPrecision]:
    """Per attention block of ``model``, the listed ops (module docstring) of the INT8 IR at ``xml`` and the
    precision the CPU plugin runs each in (``openvino_runtime_ops``)."""
    import openvino as ov

    from attn_yolo.export.openvino_export import openvino_xml

    xml = openvino_xml(xml)
    g = openvino_graph(ov.Core().read_model(str(xml)))
    seen: dict = {}
    weights = {n: [_const(g, p, set(), seen) for p in ps] for n, ps in g.producers.items()}
    runtime = openvino_runtime_ops(xml)
    rows = []
    for path_, kind, r, n in _block_ops(g, model, weights):
        got = runtime.get(n)
        if got is None:
            rows.append(OpPrecision("openvino", path_, kind, r, n, g.op[n], False, "removed by the CPU plugin"))
            continue
        node, layer, prec, main = got
        int8 = main and prec in INT8_PRECISIONS
        runs = f"{layer} {prec}" if main else f"fused into {layer} ({prec} inputs), f32 post-op"
        if int8 and layer == "Subgraph" and not reads_8bit(g, n, node, runtime, weights):
            int8, runs = False, f"Subgraph {prec}, f32 here: no 8-bit input reaches this op"
        rows.append(OpPrecision("openvino", path_, kind, r, n, g.op[n], int8, runs))
    return rows


def reads_8bit(g: Graph, n: str, node: str, runtime: dict, weights: dict[str, list[bool]],
               seen: set | None = None) -> bool:
    """Whether 8-bit data reaches op ``n`` of the Snippets subgraph ``node``: a ``FakeQuantize`` upstream of ``n`` on a
    data path (constant inputs skipped), met inside the subgraph, at its border or behind ops that only move values
    (``MOVES``: fused attention's Q and K arrive through a ``Squeeze`` of a quantized projection). ``runtime``:
    ``openvino_runtime_ops``; ``weights``: per op, which of its inputs are constant."""
    seen = set() if seen is None else seen
    for p, const in zip(g.producers.get(n, []), weights.get(n, [])):
        if const or p in seen:
            continue
        seen.add(p)
        if g.op.get(p) == "FakeQuantize":
            return True
        inside = runtime.get(p, (None,))[0] == node
        if (inside or g.op.get(p) in MOVES) and reads_8bit(g, p, node, runtime, weights, seen):
            return True
    return False


def ran_in_int8(fmt: str, path, model) -> list[OpPrecision]:
    """What ran in INT8 (``onnx``: ``onnx_precisions``; ``openvino``: ``openvino_precisions``).

    Raises:
        ValueError: a format without an INT8 graph here.
    """
    if fmt == "onnx":
        return onnx_precisions(path, model)
    if fmt == "openvino":
        return openvino_precisions(path, model)
    raise ValueError(f"format={fmt!r}: no INT8 graph to read; allowed: onnx, openvino")


# -------------------------------------------------------------------------------------------------------- rendering
def summarize(rows: list[OpPrecision]) -> dict[str, dict[str, dict[str, int]]]:
    """``{block path: {role: {"int8": n, "float": n}}}`` from ``ran_in_int8``'s rows, roles in ``ROLES`` order."""
    out: dict = {}
    for r in rows:
        c = out.setdefault(r.block, {}).setdefault(r.role, {"int8": 0, "float": 0})
        c["int8" if r.int8 else "float"] += 1
    return {b: {k: v[k] for k in ROLES if k in v} for b, v in out.items()}


def count_text(c: dict[str, int] | None) -> str:
    """``2 INT8``, ``1 INT8 + 1 float``, ``2 float`` or ``–`` (no such op)."""
    if not c:
        return "–"
    parts = [f"{c['int8']} INT8" if c["int8"] else "", f"{c['float']} float" if c["float"] else ""]
    return " + ".join(p for p in parts if p)


def ran_in_int8_text(rows: list[OpPrecision] | list[dict]) -> str:
    """The printed lines: per block, per role, how many ops ran in INT8 and in float, and which are float."""
    rows = [r if isinstance(r, OpPrecision) else OpPrecision(**r) for r in rows]
    if not rows:
        return "What ran in INT8: the model has no attention block."
    backend = {"onnxruntime": "ONNX Runtime (its QDQ-fused graph)", "openvino": "OpenVINO CPU (runtime model)"}
    lines = [f"What ran in INT8, per attention block, read from {backend[rows[0].backend]}:"]
    types = {r.block: r.block_type for r in rows}
    for block, roles in summarize(rows).items():
        parts = []
        for role_, c in roles.items():
            floats = [r for r in rows if r.block == block and r.role == role_ and not r.int8]
            names = ", ".join(_short(r.node, block) for r in floats[:3]) + (", ..." if len(floats) > 3 else "")
            parts.append(f"{role_} {count_text(c)}" + (f" ({names})" if floats and c["int8"] else ""))
        lines.append(f"  {types[block]} ({block}): " + "; ".join(parts))
    return "\n".join(lines)


def _short(node: str, block: str) -> str:
    """A node name without its block prefix: ``channel/gate/Sigmoid``."""
    s = node.removeprefix("__module.").removeprefix("/")
    for p in (block + ".", block + "/", block):
        if s.startswith(p):
            return s[len(p):]
    return s


def as_dicts(rows: list[OpPrecision]) -> list[dict]:
    """The rows as JSON-ready dicts (the report's ``int8["ran_in_int8"]``)."""
    return [asdict(r) for r in rows]


def ops_table(results: dict[str, dict[tuple[str, bool], list[OpPrecision]]]) -> list[str]:
    """Markdown rows: per block, runtime and keep-float setting, ``count_text`` per role (``summarize``), from
    ``{block: {(fmt, keep_float): rows}}`` (one attention block per model)."""
    name = {"onnx": "ONNX Runtime", "openvino": "OpenVINO"}
    out = ["| block | runtime | keep-float | " + " | ".join(ROLES) + " |", "|---|---|---|" + "---|" * len(ROLES)]
    for block, per in results.items():
        for (fmt, keep), rows in per.items():
            s = next(iter(summarize(rows).values()), {})
            cells = " | ".join(count_text(s.get(r)) for r in ROLES)
            out.append(f"| {block} | {name[fmt]} | {'list' if keep else 'rules'} | {cells} |")
    return out
