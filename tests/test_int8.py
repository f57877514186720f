"""INT8 export (``quantize=8``, ONNX Runtime QDQ and OpenVINO NNCF): the keep-float list from the blocks' tables, every
conv and linear of every block quantized or kept float on purpose, the verification report (mAP drop with a paired
bootstrap, checked against Ultralytics' validator run directly), a planted failure, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import attn_yolo_console as cli
from attn_yolo.export.int8 import (
    _onnx_in_scope,
    _scopes,
    calibration_count,
    export_int8,
    keep_float_nodes,
    keep_float_scopes,
    onnx_graph,
    openvino_graph,
)

FAST_BLOCKS = ["MHSA"]  # explicit attention weights (CBAM, a gated block, is in the walk-back and CLI tests)
ESCAPES = {
    ("MHSA", "qkv"): "qkv_heads calls F.linear on qkv.weight.chunk(3): ONNX Runtime and NNCF quantize the MatMuls it "
                     "traces to (checked here), a module-wrapping quantizer (NNCF for torch, ModelOpt QAT) would not "
                     "see the Linear; attn_yolo/nn/mhsa.py belongs to the declaration work (branch decl)",
}
"""(block, module) → why a block's nn.Linear / nn.Conv has no graph node of its own scope: named on purpose."""


@pytest.fixture(scope="module")
def calib_data(tmp_path_factory) -> Path:
    """8 train / 4 val synthetic-shapes images at 64 px: calibration and validation."""
    from attn_yolo.synthetic import generate

    return generate(tmp_path_factory.mktemp("int8") / "data", n_train=8, n_val=4, imgsz=64, seed=0)


def tiny(block: str, folder: Path):
    """The export matrix's tiny detector holding ``block`` at P3 (calibrated, untrained), as a ``YOLO``."""
    from ultralytics import YOLO

    from attn_yolo.export.matrix import _model

    return YOLO(_model(block, folder))


def test_keep_float_scopes_are_the_declared_gates_and_attention(tmp_path):
    """CBAM: its two gates (channel, spatial); MHSA: its attention (softmax weights), one scope for the block."""
    for block, want in (("CBAM", ("channel.gate", "spatial.gate")), ("MHSA", ("",))):
        y = tiny(block, tmp_path)
        blk = next(n for n, m in y.model.named_modules() if type(m).__name__ == block)
        got = keep_float_scopes(y.model)
        assert {p for p, _ in got} == {f"{blk}.{w}".rstrip(".") for w in want}
        assert all(block in why for _, why in got)


@pytest.mark.parametrize(("node", "path", "inside"), [
    ("/model.5/channel/mlp/mlp.0/Conv", "model.5.channel.mlp.0", True),
    ("/model.5/channel/mlp/mlp.0_1/Conv", "model.5.channel.mlp.0", True),  # the module's second call
    ("/model.5/channel/mlp/mlp.2/Conv", "model.5.channel.mlp.0", False),
    ("/model.5/channel/gate/Sigmoid", "model.5", True),
    ("/model.50/cv1/conv/Conv", "model.5", False),
    ("/model.2/m.0/cv1/conv/Conv", "model.2.m.0.cv1", True),
])
def test_onnx_scope_names_map_to_module_paths(node, path, inside):
    assert _onnx_in_scope(node, path) is inside


def test_calibration_count_reads_fraction_as_ultralytics():
    assert calibration_count(400, 1.0) == 400 and calibration_count(400, 0.25) == 100
    assert calibration_count(400, 50) == 50 and calibration_count(10, 50) == 10


def _weighted_in(g, path):
    from attn_yolo.export.int8 import WEIGHTED

    return [n for n, t in g.op.items() if t in WEIGHTED[g.kind] and g.in_scope(n, path)]


def _quantized_onnx(model, node) -> bool:
    """An ONNX node reads a DequantizeLinear output (its weight or activation was quantized)."""
    made = {o: n for n in model.graph.node for o in n.output}
    return any(made.get(i) is not None and made[i].op_type == "DequantizeLinear" for i in node.input)


def check_every_conv_quantized_or_kept(block: str, folder: Path, data: Path, fmt: str) -> None:
    """In ``block``'s INT8 graph (with its keep-float list), every weighted node of the block is quantized or kept
    float by name, and every ``nn.Conv*`` / ``nn.Linear`` of the block has its own node (none escapes through
    ``F.conv2d`` / ``F.linear`` in a parent's scope)."""
    import onnx

    y = tiny(block, folder)
    blk = next(n for n, m in y.model.named_modules() if type(m).__name__ == block)
    out = folder / (f"{block}.onnx" if fmt == "onnx" else f"{block}_openvino_model")
    f, kept = export_int8(y, fmt, 64, str(data), keep_float=True, out=out, overwrite=True)
    names = {n for v in kept.values() for n in v}
    if fmt == "onnx":
        model = onnx.load(str(f))
        nodes = {n.name: n for n in model.graph.node}
        g = onnx_graph(f)  # the quantized graph: Q/DQ nodes added, the original node names kept
        weighted = _weighted_in(g, blk)
        bad = [n for n in weighted if not _quantized_onnx(model, nodes[n]) and n not in names]
        ok_kept = [n for n in names if n in nodes]
        assert len(ok_kept) == len(names), set(names) - set(nodes)
    else:
        import openvino as ov

        ovm = ov.Core().read_model(str(f))
        g = openvino_graph(ovm)
        weighted = _weighted_in(g, blk)
        ops = {o.get_friendly_name(): o for o in ovm.get_ordered_ops()}

        def fq(name):  # an input arrives through a FakeQuantize
            return any(i.get_source_output().get_node().get_type_name() == "FakeQuantize"
                       for i in ops[name].inputs())

        bad = [n for n in weighted if not fq(n) and n not in names]
    assert weighted, f"{block}: no weighted node found in scope {blk}"
    assert not bad, f"{block} ({fmt}): neither quantized nor on the keep-float list: {bad}"
    mods = [p for p, m in y.model.get_submodule(blk).named_modules()
            if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Linear))]
    missing = [p for p in mods if not _weighted_in(g, f"{blk}.{p}") and (block, p) not in ESCAPES]
    assert not missing, f"{block} ({fmt}): modules with no node of their own (F.conv2d/F.linear?): {missing}"


def test_int8_calibration_shows_its_batches_on_a_terminal_only(tmp_path, calib_data, monkeypatch, capsys):
    """The calibration (minutes on a real dataset) under a bar on stderr when it is a terminal, silent elsewhere; the
    export checks likewise (one bar over their cases)."""
    import attn_yolo.progress
    from attn_yolo.export import verify_onnx

    y = tiny("SE", tmp_path)
    f, _ = export_int8(y, "onnx", 64, str(calib_data), out=tmp_path / "a.onnx")
    assert "INT8 calibration" not in capsys.readouterr().err
    monkeypatch.setattr(attn_yolo.progress, "is_terminal", lambda stream: True)
    export_int8(y, "onnx", 64, str(calib_data), out=tmp_path / "b.onnx")
    err = capsys.readouterr().err
    assert "INT8 calibration" in err and "batch" in err
    verify_onnx(tmp_path / "b.onnx", y)
    assert "verify onnx" in capsys.readouterr().err


@pytest.mark.parametrize("block", FAST_BLOCKS)
def test_every_conv_of_a_block_is_quantized_or_kept_float_onnx(block, tmp_path, calib_data):
    check_every_conv_quantized_or_kept(block, tmp_path, calib_data, "onnx")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_every_conv_of_every_block_is_quantized_or_kept_float(fmt, tmp_path, calib_data):
    from attn_yolo.registry import MODULES

    for block in MODULES:
        check_every_conv_quantized_or_kept(block, tmp_path / block, calib_data, fmt)


def test_keep_float_nodes_walk_back_to_the_gate_producers(tmp_path, calib_data):
    """CBAM's channel gate keeps float the two MLP output convs (avg and max path) feeding its sigmoid, the Add
    summing them (the logits), the sigmoid and its product, and nothing of the first MLP layer; read off the fp32
    graph by hand."""
    from attn_yolo.export.onnx_export import export_onnx

    y = tiny("CBAM", tmp_path)
    f = export_onnx(y, 64, out=tmp_path / "fp32.onnx")
    g = onnx_graph(f)
    blk = next(n for n, m in y.model.named_modules() if type(m).__name__ == "CBAM")
    kept = keep_float_nodes(g, [s for s in _scopes(y.model) if s[0] == f"{blk}.channel.gate"])[f"{blk}.channel.gate"]
    sig = next(n for n, t in g.op.items() if t == "Sigmoid" and "/channel/gate/" in n)
    convs = [n for n in g.op if g.op[n] == "Conv" and "/channel/mlp/mlp.2" in n]
    muls = [n for n in g.consumers[sig]]
    add = [n for n in g.op if g.op[n] == "Add" and n.startswith(f"/{blk}/channel/")]
    assert len(convs) == 2 and len(add) == 1 and set(kept) == {sig, *convs, *muls, *add}


def _report(path: Path) -> dict:
    return json.loads(path.read_text())


def test_int8_cli_onnx_runs_the_map_comparison_and_agrees_with_ultralytics(tmp_path, calib_data, monkeypatch,
                                                                          capsys):
    """Fast must-show: a tiny model at 64 px exported INT8 for ONNX Runtime; the report's mAP comparison runs, and its
    INT8 and fp32 mAP50-95 equal Ultralytics' validator run directly on the same files. Its fp32 figure as ``attn-yolo
    val`` gives it is the validator's as ``val`` runs it on the checkpoint (the same batch, rect, size and the rest:
    ``YOLO(pt).val``, what the CLI calls), and the printed report names the settings the paired figures differ in."""
    from ultralytics import YOLO
    from ultralytics.models.yolo.detect import DetectionValidator

    settings = {}  # validator run name -> the settings it validated with
    validate = DetectionValidator.__call__

    def recorded(self, *a, **k):
        out = validate(self, *a, **k)
        keys = ("batch", "rect", "imgsz", "conf", "iou", "split", "max_det", "single_cls", "augment", "quantize")
        settings[self.args.name] = {key: getattr(self.args, key) for key in keys}
        return out

    monkeypatch.setattr(DetectionValidator, "__call__", recorded)
    y = tiny("CBAM", tmp_path)
    pt = tmp_path / "tiny-CBAM.pt"
    out = tmp_path / "tiny_int8.onnx"
    rc = cli.main(["export", f"model={pt}", "format=onnx", "quantize=8", f"data={calib_data}", "imgsz=64",
                   f"out={out}", "int8_max_drop=100", "conf=0.05"])
    rep = _report(out.with_suffix(".verify.json"))
    m = next(c for c in rep["checks"] if c["name"] == "map")
    assert rc == 0 and not m["not_run"] and rep["precision"] == "int8"
    assert {c["case"].split()[-1] for c in rep["checks"] if c["name"] == "raw"} == {"P3", "P4", "P5"}
    kw = {"data": str(calib_data), "imgsz": 64, "batch": 1, "rect": False, "plots": False, "device": "cpu",
          "verbose": False, "project": str(tmp_path), "exist_ok": True}
    direct8 = YOLO(str(out), task="detect").val(name="i8", **kw).box.map
    direct32 = y.val(name="f32", **kw).box.map
    assert rep["int8"]["int8"] == pytest.approx(100 * direct8, abs=1e-9)
    assert rep["int8"]["fp32"] == pytest.approx(100 * direct32, abs=1e-9)
    assert rep["int8"]["drop"] == pytest.approx(100 * (direct32 - direct8), abs=1e-9)
    assert rep["int8"]["lo"] <= rep["int8"]["drop"] <= rep["int8"]["hi"]
    assert rep["int8"]["latency"]["fp32"] > 0 and rep["int8"]["latency"]["int8"] > 0
    as_val = YOLO(str(pt)).val(data=str(calib_data), imgsz=64, device="cpu", plots=False, project=str(tmp_path),
                               name="as-val", exist_ok=True)  # what `attn-yolo val model=<pt> data=... imgsz=64` runs
    assert settings["fp32-val"] == settings["as-val"] and settings["as-val"]["rect"] is True
    assert settings["fp32"]["rect"] is False and settings["fp32"]["batch"] == 1  # the paired figures: they differ
    v = rep["int8"]["fp32_val"]
    assert v == {"map50_95": pytest.approx(100 * as_val.box.map, abs=1e-9), "batch": settings["as-val"]["batch"],
                 "rect": True, "imgsz": 64}
    printed = capsys.readouterr().out
    assert (f"fp32 mAP50-95 as `attn-yolo val` gives it (batch {v['batch']}, rect: each batch padded to one "
            f"rectangle; imgsz 64): {v['map50_95']:.2f}; the paired comparison above differs in batch and rect: "
            f"batch 1, rect False, each image alone in a square letterbox") in printed


def test_map_check_fails_above_the_threshold():
    """The map check against a simulated pair of runs with a known mAP gap (the ablation's simulator)."""
    from attn_yolo.ablate.runs.perimage import recompute, simulate_run, simulate_val_set
    from attn_yolo.export.int8_verify import map_check

    rng = np.random.default_rng(0)
    val = simulate_val_set(rng, 60)
    good, bad = simulate_run(rng, val, skill=2.0), simulate_run(rng, val, skill=0.5)
    gap = 100 * (recompute(good)["map50_95"] - recompute(bad)["map50_95"])
    assert gap > 1
    c = map_check({"fp32": good, "int8": bad}, max_drop=gap / 2, n_boot=200)
    assert not c.passed and c.value == pytest.approx(gap, abs=1e-9) and c.detail["lo"] <= gap <= c.detail["hi"]
    assert map_check({"fp32": good, "int8": bad}, max_drop=gap * 2, n_boot=200).passed


@pytest.mark.parametrize(("argv", "message"), [
    (["format=engine"], "quantize=8: format='engine' has no INT8 path here; allowed: onnx, openvino"),
    (["format=torchscript"], "quantize=8: format='torchscript' has no INT8 path here"),
    (["int8_max_drop=0"], "int8_max_drop: 0; expected mAP50-95 points in (0, 100]"),
    (["int8_max_drop=101"], "int8_max_drop: 101; expected"),
    (["fraction=1.5"], "fraction: 1.5; expected"),
    (["keep_float=maybe"], "keep_float: 'maybe'; expected"),
    (["dynamic=True"], "quantize=8 with dynamic=True"),
    (["data={dir}/none.yaml"], "no calibration images: data= '{dir}/none.yaml' is not at hand"),
    ([], "no calibration images: the model records no training dataset; pass data="),
])
def test_int8_bad_input_exits_2_with_one_line(argv, message, tmp_path, capsys):
    from ultralytics import YOLO

    pt = tmp_path / "m.pt"
    YOLO("yolo11n.yaml").save(str(pt))
    before = {p.name for p in tmp_path.iterdir()}
    rc = cli.main(["export", f"model={pt}", "quantize=8", "imgsz=64", *(a.format(dir=tmp_path) for a in argv)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err, err
    assert message.format(dir=tmp_path) in err
    assert {p.name for p in tmp_path.iterdir()} == before


def test_int8_without_any_quantize_keys_stay_refused(capsys, tmp_path):
    rc = cli.main(["export", "model=x.pt", "quantize=7"])
    assert rc == 2 and "quantize: 7; expected 8 (INT8), 16" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- trained models (slow)
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``{block: last.pt}``: yolo11n (+ block at the backbone) trained briefly on synthetic-shapes (detections
    exist), and the dataset."""
    from attn_yolo.synthetic import generate

    root = tmp_path_factory.mktemp("int8-trained")
    data = generate(root / "data", n_train=400, n_val=60, imgsz=96, seed=0)
    return root, data


def train_block(block: str, root: Path, data: Path) -> Path:
    from ultralytics import YOLO

    from attn_yolo.insertion.insert import insert_dict
    from attn_yolo.synthetic import QUICK_TRAIN_ARGS

    pt = root / block / "weights" / "last.pt"
    if not pt.exists():
        cfg = root / f"yolo11n-{block}.yaml"
        cfg.write_text(yaml.safe_dump(insert_dict("yolo11n.yaml", block, "backbone")))
        YOLO(str(cfg)).train(data=str(data), workers=0, plots=False, device="cpu", project=str(root), name=block,
                             exist_ok=True, verbose=False, seed=0, **{**QUICK_TRAIN_ARGS, "epochs": 3, "imgsz": 96})
    return pt


@pytest.mark.slow
@pytest.mark.parametrize("block", sorted(__import__("attn_yolo.registry", fromlist=["MODULES"]).MODULES))
def test_every_block_exports_int8_for_both_runtimes_and_the_map_comparison_runs(block, trained):
    root, data = trained
    pt = train_block(block, root, data)
    for fmt in ("onnx", "openvino"):
        out = root / (f"{block}_int8.onnx" if fmt == "onnx" else f"{block}_int8_openvino_model")
        rc = cli.main(["export", f"model={pt}", f"format={fmt}", "quantize=8", "imgsz=96", f"out={out}",
                       "overwrite=True", "int8_max_drop=100", "fraction=64"])
        rep_file = out.with_suffix(".verify.json") if fmt == "onnx" else out / f"{out.name[:-15]}.verify.json"
        rep = _report(rep_file)
        m = next(c for c in rep["checks"] if c["name"] == "map")
        assert rc in (0, 1) and not m["not_run"] and rep["int8"]["fp32"] > 0, (block, fmt, m)


def plant(yolo) -> int:
    """Force every CBAM channel gate into a range INT8 cannot hold: one logit channel biased to +2e4 (its gate 1,
    as good as before), the others scaled ×20 (gates near 0 or 1 per image). One 8-bit scale over ±2e4 rounds every
    other logit to 0, so INT8 opens every gate to 0.5. Returns how many gates were planted."""
    n = 0
    for m in yolo.model.modules():
        if type(m).__name__ == "CBAM":
            conv = m.channel.mlp[2]
            with torch.no_grad():
                conv.weight *= 20
                if conv.bias is None:
                    conv.bias = torch.nn.Parameter(torch.zeros(conv.out_channels))
                conv.bias *= 20
                conv.bias[0] = 2e4
            n += 1
    return n


@pytest.mark.slow
def test_a_planted_gate_failure_fails_the_threshold_exit_1(trained, tmp_path):
    from ultralytics import YOLO

    root, data = trained
    y = YOLO(str(train_block("CBAM", root, data)))
    assert plant(y) > 0
    pt = tmp_path / "planted.pt"
    y.save(str(pt))
    out = tmp_path / "planted_int8.onnx"
    rc = cli.main(["export", f"model={pt}", "format=onnx", "quantize=8", "imgsz=96", f"out={out}", "fraction=64",
                   "keep_float=False", f"data={data}"])
    rep = _report(out.with_suffix(".verify.json"))
    m = next(c for c in rep["checks"] if c["name"] == "map")
    assert rc == 1 and not m["passed"] and m["value"] > 0.55, m


@pytest.mark.slow
def test_keep_float_auto_recovers_the_planted_gates(trained, tmp_path):
    """``keep_float=auto`` on the planted model: Ultralytics' rules fail the threshold, the keep-float export (the
    planted gates' logits kept float) is tried and kept when its drop is smaller; the report gives both drops."""
    from ultralytics import YOLO

    root, data = trained
    y = YOLO(str(train_block("CBAM", root, data)))
    plant(y)
    pt = tmp_path / "planted.pt"
    y.save(str(pt))
    out = tmp_path / "auto_int8.onnx"
    cli.main(["export", f"model={pt}", "format=onnx", "quantize=8", "imgsz=96", f"out={out}", "fraction=64",
              f"data={data}"])
    kf = _report(out.with_suffix(".verify.json"))["int8"]["keep_float"]
    assert set(kf["drops"]) == {"with", "without"} and kf["drops"]["with"] < kf["drops"]["without"], kf
    assert kf["note"].startswith("kept: the keep-float export") and kf["nodes"]
