"""What ran in INT8 per attention block, read from the exported graphs (``attn_yolo.export.int8_graph``): MHSA's
attention MatMuls quantized in ONNX Runtime, CBAM's sigmoid gates float in OpenVINO, and the keep-float list reaching
both quantizers (the gate's logits float with it, INT8 without), each checked against the graph read independently
(QDQ pairs in the ONNX file, FakeQuantize ops in the OpenVINO IR)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_yolo.export.int8 import export_int8
from attn_yolo.export.int8_graph import count_text, ran_in_int8, ran_in_int8_text, summarize


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """``get(block, fmt, keep_float) -> (model, file)``: the tiny detector holding ``block`` exported INT8 at 64 px,
    calibrated on 8 synthetic-shapes images (cached per module)."""
    from ultralytics import YOLO

    from attn_yolo.export.matrix import _model
    from attn_yolo.synthetic import generate

    root = tmp_path_factory.mktemp("int8-graph")
    data = generate(root / "data", n_train=8, n_val=2, imgsz=64, seed=0)
    done: dict = {}

    def get(block: str, fmt: str, keep: bool):
        if (block, fmt, keep) not in done:
            y = YOLO(_model(block, root))
            tag = f"{block}-{'kf' if keep else 'rules'}"
            out = root / (f"{tag}.onnx" if fmt == "onnx" else f"{tag}_openvino_model")
            f, _ = export_int8(y, fmt, 64, str(data), keep_float=keep, out=out, overwrite=True)
            done[(block, fmt, keep)] = (y, f)
        return done[(block, fmt, keep)]

    return get


def _dq_inputs(f: Path, node: str) -> list[bool]:
    """Per data input of ``node`` in the ONNX file: does a DequantizeLinear make it (read with onnx alone)."""
    import onnx

    g = onnx.load(str(f)).graph
    made = {o: n.op_type for n in g.node for o in n.output}
    n = next(n for n in g.node if n.name == node)
    return [made.get(i) == "DequantizeLinear" for i in n.input[:2]]


PASS_THROUGH = {"Concat", "Reshape", "Transpose", "Squeeze", "Unsqueeze"}
"""Ops that move values without computing: a FakeQuantize before them quantizes the op after them (NNCF places one
before a Concat, e.g. CBAM's pooled maps feeding its spatial conv)."""


def _fake_quantized_inputs(xml: Path, name: str) -> bool:
    """Whether an activation input of op ``name`` in the OpenVINO IR arrives through a FakeQuantize (directly or
    through ``PASS_THROUGH`` ops; read with openvino alone)."""
    import openvino as ov

    op = next(o for o in ov.Core().read_model(str(xml)).get_ordered_ops() if o.get_friendly_name() == name)

    def fq(node) -> bool:
        t = node.get_type_name()
        if t == "FakeQuantize":
            return True
        return t in PASS_THROUGH and any(fq(i.get_source_output().get_node()) for i in node.inputs())

    return fq(op.input(0).get_source_output().get_node())


def test_mhsa_in_onnx_runtime_runs_its_attention_matmuls_in_int8(exports):
    """Ultralytics' rules quantize every MatMul: MHSA's QKᵀ and AV (two activations each) sit inside QDQ pairs in the
    file and ONNX Runtime runs them as QLinearMatMul; the report says so."""
    y, f = exports("MHSA", "onnx", False)
    rows = ran_in_int8("onnx", f, y.model)
    mm = [r for r in rows if r.role == "attention MatMul"]
    assert len(mm) == 2 and all(r.int8 and r.qdq and r.runs_as.startswith("QLinear") for r in mm), mm
    assert all(all(_dq_inputs(f, r.node)) for r in mm)  # both operands dequantized in the file: QKᵀ and AV
    assert {r.role for r in rows if r.role == "linear" and r.int8} == {"linear"}  # qkv, proj, mlp: QGemm
    text = ran_in_int8_text(rows)
    assert "MHSA (" in text and "attention MatMul 2 INT8" in text, text


def test_mhsa_keep_float_keeps_the_attention_matmuls_float_in_onnx_runtime(exports):
    y, f = exports("MHSA", "onnx", True)
    mm = [r for r in ran_in_int8("onnx", f, y.model) if r.role in ("attention MatMul", "softmax")]
    assert len(mm) == 3 and not any(r.int8 for r in mm), mm
    assert not any(any(_dq_inputs(f, r.node)) for r in mm if r.op == "MatMul")


def test_cbam_in_openvino_keeps_its_sigmoid_gates_float(exports):
    """OpenVINO (NNCF, Ultralytics' rules): both CBAM gates' Sigmoids get no FakeQuantize in the IR and run in f32 in
    the CPU plugin's runtime model (fused after their producer as a post-op); the report names them float."""
    y, xml = exports("CBAM", "openvino", False)
    rows = ran_in_int8("openvino", xml, y.model)
    gates = [r for r in rows if r.role == "gate"]
    assert len(gates) == 2 and not any(r.int8 for r in gates), gates
    assert {("channel.gate" in r.node) + 2 * ("spatial.gate" in r.node) for r in gates} == {1, 2}
    assert not any(_fake_quantized_inputs(xml, r.node) for r in gates)
    assert summarize(rows)[gates[0].block]["gate"] == {"int8": 0, "float": 2}
    assert "gate 2 float" in ran_in_int8_text(rows)


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_keep_float_list_reaches_the_quantizer(exports, fmt):
    """The convs making CBAM's gate logits (channel MLP output, spatial conv) run in INT8 under Ultralytics' rules and
    in float with the keep-float list, read from the runtime's graph and, independently, from the exported file: this
    fails if the list stops reaching ORT's ``nodes_to_exclude`` or NNCF's ``ignored_scope``."""
    def logit_convs(keep):
        y, f = exports("CBAM", fmt, keep)
        rows = [r for r in ran_in_int8(fmt, f, y.model) if r.role == "conv"
                and any(s in r.node for s in ("mlp.2", "spatial/conv", "spatial.conv"))]
        assert len(rows) == 3, rows  # avg and max path through mlp.2, the spatial conv
        if fmt == "onnx":
            file_int8 = [all(_dq_inputs(f, r.node)) for r in rows]
        else:
            file_int8 = [_fake_quantized_inputs(f, r.node) for r in rows]
        return [r.int8 for r in rows], file_int8

    assert logit_convs(False) == ([True] * 3, [True] * 3)
    assert logit_convs(True) == ([False] * 3, [False] * 3)


def test_count_text():
    assert count_text({"int8": 2, "float": 0}) == "2 INT8"
    assert count_text({"int8": 1, "float": 1}) == "1 INT8 + 1 float"
    assert count_text(None) == "–"


# ------------------------------------------------------------------------------------ when INT8 is slower: the CPU
CPUINFO = """processor\t: 0
model name\t: Example CPU 9000
flags\t\t: fpu sse avx2 avx512f avx512_vnni amx_tile
processor\t: 1
model name\t: Example CPU 9000
flags\t\t: fpu sse avx2 avx512f avx512_vnni amx_tile
"""


def test_cpu_info_reads_name_vnni_and_amx():
    from attn_yolo.export.cpu import cpu_info, cpu_line

    c = cpu_info(CPUINFO)
    assert c["name"] == "Example CPU 9000" and c["vnni"] == ["avx512_vnni"] and c["amx"] == ["amx_tile"]
    assert "VNNI yes (avx512_vnni), AMX yes (amx_tile)" in cpu_line(c)
    bare = cpu_info(CPUINFO.replace(" avx512_vnni amx_tile", ""))
    assert bare["vnni"] == [] and bare["amx"] == [] and "VNNI no, AMX no" in cpu_line(bare)
    here = Path("/proc/cpuinfo")
    if here.exists():  # this machine, read independently
        flags = set(next(ln for ln in here.read_text().splitlines() if ln.startswith("flags")).split(":")[1].split())
        assert bool(cpu_info()["vnni"]) == bool(flags & {"avx512_vnni", "avx_vnni", "avx_vnni_int8"})
        assert bool(cpu_info()["amx"]) == bool(flags & {"amx_int8", "amx_tile"})


def test_slower_note_names_the_cpu_and_the_faster_runtime():
    from attn_yolo.export.cpu import cpu_info, slower_note

    c = cpu_info(CPUINFO)
    assert slower_note("onnx", 0.8, c) == ""
    assert "no faster than fp32" in slower_note("onnx", 1.0, c) and "SLOWER" not in slower_note("onnx", 1.0, c)
    note = slower_note("onnx", 1.7, c, {"openvino": 0.6})
    assert "SLOWER" in note and "×1.70" in note and "Example CPU 9000" in note and "VNNI yes" in note
    assert "OpenVINO (NNCF) INT8 ran ×0.60" in note and "format=openvino quantize=8" in note
    assert "deploy fp32" in slower_note("onnx", 1.7, c, {"openvino": 1.2})
    bare = cpu_info(CPUINFO.replace(" avx512_vnni amx_tile", ""))
    assert "neither VNNI nor AMX" in slower_note("openvino", 1.1, bare)


def test_report_prints_the_slower_note_with_the_cpu():
    from attn_yolo.export.cpu import cpu_info
    from attn_yolo.export.report import int8_text

    t = {"raw_rel": 0.15, "iou_min": 0.5, "unmatched": 0.25, "int8_max_drop": 0.55}
    la = {"fp32": 10.0, "int8": 18.0, "ratio": 1.8, "load": 0.5, "cpu": cpu_info(CPUINFO)}
    text = int8_text({"format": "onnx", "latency": la}, t)
    assert "INT8 is SLOWER than fp32 in ONNX Runtime (QDQ) on this CPU (×1.80): Example CPU 9000" in text
    fast = int8_text({"format": "openvino", "latency": {**la, "int8": 6.0, "ratio": 0.6}}, t)
    assert "SLOWER" not in fast and "CPU: Example CPU 9000" in fast


def _graph(edges: dict[str, list[str]], ops: dict[str, str]):
    from attn_yolo.export.int8 import Graph

    consumers: dict = {}
    for n, ps in edges.items():
        for p in ps:
            consumers.setdefault(p, []).append(n)
    return Graph("openvino", ops, edges, consumers)


def test_an_op_in_a_u8_subgraph_is_int8_only_where_8bit_data_reaches_it():
    """ELA in the trained study model: its gate's group norm, sigmoid and products are one Snippets Subgraph whose
    ``u8`` comes from the residual's FakeQuantize; the sigmoid's logits come from a float conv, so it ran in f32.
    Fused attention: Q and K arrive through FakeQuantize ops, so its MatMul ran on 8-bit data."""
    from attn_yolo.export.int8_graph import reads_8bit

    ops = {"conv": "GroupConvolution", "gn": "GroupNormalization", "sig": "Sigmoid", "x": "Convolution",
           "fq_x": "FakeQuantize", "mul": "Multiply", "add": "Add", "w": "Constant",
           "q": "Convolution", "k": "Convolution", "fq_q": "FakeQuantize", "fq_k": "FakeQuantize", "qk": "MatMul"}
    edges = {"conv": ["x", "w"], "gn": ["conv"], "sig": ["gn"], "fq_x": ["x"], "mul": ["fq_x", "sig"],
             "add": ["fq_x", "mul"], "fq_q": ["q"], "fq_k": ["k"], "qk": ["fq_q", "fq_k"]}
    g = _graph(edges, ops)
    weights = {n: [p == "w" for p in ps] for n, ps in edges.items()}
    runtime = {n: ("S1", "Subgraph", "u8", True) for n in ("gn", "sig", "mul", "add")}
    runtime.update({"conv": ("C", "Convolution", "f32", True), "fq_x": ("X", "Convolution", "u8", True),
                    "qk": ("S2", "Subgraph", "u8", True), "fq_q": ("S2", "Subgraph", "u8", True),
                    "fq_k": ("K", "Convolution", "u8", True)})
    assert not reads_8bit(g, "sig", "S1", runtime, weights)  # group norm ← float conv: the subgraph's border
    assert reads_8bit(g, "mul", "S1", runtime, weights) and reads_8bit(g, "add", "S1", runtime, weights)
    assert reads_8bit(g, "qk", "S2", runtime, weights)  # one FakeQuantize inside the subgraph, one at its border
    g2 = _graph({**edges, "sq": ["fq_k"], "sdpa": ["fq_q", "sq"], "gn": ["sq2"], "sq2": ["conv"]},
                {**ops, "sq": "Squeeze", "sdpa": "ScaledDotProductAttention", "sq2": "Reshape"})
    w2 = {n: [False] * len(ps) for n, ps in g2.producers.items()}
    rt2 = {**runtime, "sq": ("R", "Reshape", "i8", True), "sdpa": ("S3", "Subgraph", "i8", True),
           "fq_q": ("Q", "Subgraph", "f32", True), "sq2": ("R2", "Reshape", "f32", True)}
    assert reads_8bit(g2, "sdpa", "S3", rt2, w2)  # K: FakeQuantize → Squeeze (a node of its own) → fused attention
    assert not reads_8bit(g2, "sig", "S1", rt2, w2)  # a Reshape of a float conv's output moves float values
    weights["qk"] = [True, True]  # both inputs constant: no data path, nothing 8-bit reaches it
    assert not reads_8bit(g, "qk", "S2", runtime, weights)
