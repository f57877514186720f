"""A new block in one file is known to every tool: a temporary module that declares a block (``@declare``) works in
a YAML (and by its alias), in ``attn_yolo.insert``, as ``C3k2_<X>``, in a verified ONNX export, in heatmaps, in
health, in ``attn-yolo modules`` and in a weights-only reload, with no other file touched (issue 34). Its declared
foreign signature, plausible range, copy's default and minimum opset reach the YAML builder and the exporter; and
each table derived from the declarations, frozen to a copy taken before the block existed (a table bypassing the
declarations), breaks that use."""

import importlib
import pkgutil
import sys

import pytest
import torch
import yaml
from ultralytics import YOLO

import attn_yolo
import attn_yolo_console as cli
from attn_yolo.checkpoint import load_model
from attn_yolo.export.matrix import calibrate, tiny_yaml
from attn_yolo.registry import DECLARATIONS

BLOCK = '''"""A new channel gate, declared in its own file: s = σ(W GAP(x) / t), y = x ⊙ s."""

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_number
from attn_yolo.nn.declaration import CopyDefault, Param, Signature, ch, declare, hp, positive_int, unused
from attn_yolo.nn.layer_scale import LayerScale, gated


class TmpProjection(nn.Module):
    """The block's own helper class (weights-only loading must allow it)."""

    def __init__(self, c: int):
        super().__init__()
        self.fc = nn.Conv2d(c, c, 1)

    def forward(self, x):
        return self.fc(x)


COPY = "TmpGateAttention(channel, temperature=4.0) (a test copy) uses t = 4"


@declare("TmpGate", paper="Nobody, A test block, 2026",
         params=(Param("t", "a number > 0", (lambda v: is_number(v) and 0 < v <= 10, "0 < t <= 10"),
                       copies=(CopyDefault(4.0, COPY, "t"),)),),
         aliases=("TmpGateAttention",), gate_maps={"channel": ("gain", "gate")}, example_args=(2.0,),
         signatures=(Signature("TmpGateAttention(channel, size=3, temperature=4.0)", "a test copy",
                               (ch("channel"), unused("size", 3, positive_int), hp("temperature", "t", 4.0)),
                               prefer=True),),
         min_opset=13, opset_ops="ReduceMean over H and W (a test need)", helpers=(TmpProjection,))
class TmpGate(nn.Module):
    """TmpGate: a temperature-scaled channel gate (a test block)."""

    def __init__(self, c1: int, t: float = 1.0, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "TmpGate")
        check(is_number(t) and t > 0, where, "t", t, "a number > 0")
        check_init_values(init_values, where)
        self.c1, self.t = c1, t
        self.proj = TmpProjection(c1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gate(self.proj(x.mean((2, 3), keepdim=True)) / self.t)
        return gated(x, x * s, self.scale)
'''


@pytest.fixture
def new_block(tmp_path, monkeypatch):
    """Write the block's file into ``tmp_path``, import it (which declares it), and take it away afterwards."""
    (tmp_path / "tmp_gate_block.py").write_text(BLOCK)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("tmp_gate_block")
    yield mod.TmpGate
    attn_yolo.unregister()
    del DECLARATIONS["TmpGate"]
    sys.modules.pop("tmp_gate_block", None)
    attn_yolo.register()


def use_everywhere(cls, tmp_path, capsys, log) -> None:
    """Every use of the new block the tools make; raises (AssertionError or the tool's error) where one fails."""
    assert attn_yolo.MODULES["TmpGate"] is cls and cls.declaration.gates == ("gate",)

    # YAML (its own name, with the declared example args, and its alias), and C3k2_<X>
    y = tmp_path / "tiny.yaml"
    d = tiny_yaml("TmpGate")
    d["backbone"] += [[-1, 1, "TmpGateAttention", [0.5]], [-1, 1, "C3k2_TmpGate", [64, False, 0.25, {"t": 3.0}]]]
    y.write_text(yaml.safe_dump(d))
    torch.manual_seed(0)
    model = YOLO(str(y))
    blocks = [m for m in model.model.modules() if type(m) is cls]
    assert [b.t for b in blocks] == [2.0, 0.5, 3.0] and type(model.model.model[3]).__name__ == "TmpGate"
    assert type(model.model.model[-2]).__name__ == "C3k2_TmpGate"

    # insert into a stock YAML
    ins = attn_yolo.insert("yolo11n.yaml", "TmpGate", at="backbone")
    assert any(type(m) is cls for m in ins.model.modules())

    # weights-only reload of a saved checkpoint (the block and its helper allow-listed)
    calibrate(model, 96)
    pt = tmp_path / "tiny.pt"
    model.save(str(pt))
    reloaded = load_model(str(pt), "model", ValueError)
    assert sum(type(m) is cls for m in reloaded.model.modules()) == 3

    # export with verification
    from attn_yolo.export import export_onnx, verify_onnx

    onnx = export_onnx(str(pt), imgsz=96, out=tmp_path / "tiny.onnx")
    report = verify_onnx(onnx, str(pt))
    assert report.passed, report.failures

    # heatmap and health
    from attn_yolo.health.measure import measure
    from attn_yolo.heatmap.capture import AttentionCapture

    net = model.model.eval()
    x = torch.rand(1, 3, 96, 96)
    with AttentionCapture(net, layers="all") as cap, torch.no_grad():
        net(x)
    maps = cap.maps()
    assert {m.kind for m in maps if m.block == "TmpGate"} == {"channel"}
    health = measure(net, x)
    assert any(v["block"] == "TmpGate" for v in health.values())

    # attn-yolo modules
    assert cli.main(["modules"]) == 0
    assert "TmpGate" in capsys.readouterr().out

    # its minimum opset, before any export
    from attn_yolo.export import OpsetError, check_opset

    with pytest.raises(OpsetError, match=r"TmpGate \(layer 3\) needs opset >= 13: ReduceMean over H and W"):
        check_opset(model.model, 12)

    # a row leaving t out (a channel count first): our t, and the line naming the copy's default and the edit
    log.clear()
    d = tiny_yaml("TmpGate")
    d["backbone"][-1] = [-1, 1, "TmpGate", [64]]
    y.write_text(yaml.safe_dump(d))
    block = YOLO(str(y)).model.model[5]  # the row that replaced the last conv
    assert type(block) is cls and block.t == 1.0, vars(block).get("t")
    line = next((x for x in log if "TmpGateAttention(channel, temperature=4.0) (a test copy)" in x), "")
    assert "uses t = 4" in line and "write [4.0] for that" in line, log

    # a row written for the copy's signature (channel, size, temperature): read as written, t = 0.5
    d["backbone"][-1] = [-1, 1, "TmpGate", [64, 3, 0.5]]
    y.write_text(yaml.safe_dump(d))
    block = YOLO(str(y)).model.model[5]
    assert block.t == 0.5 and block.scale is None, (block.t, block.scale)


def test_a_block_declared_in_one_file_works_everywhere(new_block, tmp_path, capsys, log):
    use_everywhere(new_block, tmp_path, capsys, log)


def live_tables() -> dict[str, object]:
    """Every table the package derives from the declarations (``LiveMapping``, a ``LiveSequence``'s mapping), by
    ``module.NAME``, found by importing every module of the package."""
    from attn_yolo.nn.declaration import LiveMapping, LiveSequence

    found = {}
    for info in pkgutil.walk_packages(attn_yolo.__path__, "attn_yolo."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            table = value._map if isinstance(value, LiveSequence) else value
            if isinstance(table, LiveMapping) and id(table) not in {id(t) for t in found.values()}:
                found[f"{info.name}.{name}"] = table
    return found


TABLES = live_tables()


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_table_frozen_before_the_block_breaks_its_use(name, tmp_path, monkeypatch, capsys, log):
    """``name`` frozen to its contents before the block's file is imported (as a copied table would be): if the
    block adds anything to it, some use of the block fails; a table the block adds nothing to is not read for it."""
    table = TABLES[name]
    before, build = dict(table), table._build
    monkeypatch.setattr(table, "_build", lambda: before)  # frozen before the block exists
    table._version = -1
    (tmp_path / "tmp_gate_block.py").write_text(BLOCK)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        cls = importlib.import_module("tmp_gate_block").TmpGate
        if build() == before:
            pytest.skip(f"{name}: the block declares nothing this table holds")
        with pytest.raises((Exception, pytest.fail.Exception)):  # any failure of any use (a pytest.raises too)
            use_everywhere(cls, tmp_path, capsys, log)
    finally:
        monkeypatch.undo()
        table._version = -1
        attn_yolo.unregister()
        del DECLARATIONS["TmpGate"]
        sys.modules.pop("tmp_gate_block", None)
        attn_yolo.register()
