"""A new block in one file is known to every tool: a temporary module that declares a block (``@declare``) works in
a YAML (and by its alias), in ``attn_yolo.insert``, as ``C3k2_<X>``, in a verified ONNX export, in heatmaps, in
health, in ``attn-yolo modules`` and in a weights-only reload, with no other file touched (issue 34)."""

import importlib
import sys

import pytest
import torch
import yaml
from ultralytics import YOLO

import attn_yolo
from attn_yolo import cli
from attn_yolo.checkpoint import load_model
from attn_yolo.export.matrix import calibrate, tiny_yaml
from attn_yolo.registry import DECLARATIONS

BLOCK = '''"""A new channel gate, declared in its own file: s = σ(W GAP(x) / t), y = x ⊙ s."""

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_number
from attn_yolo.nn.declaration import Param, declare
from attn_yolo.nn.layer_scale import LayerScale, gated


class TmpProjection(nn.Module):
    """The block's own helper class (weights-only loading must allow it)."""

    def __init__(self, c: int):
        super().__init__()
        self.fc = nn.Conv2d(c, c, 1)

    def forward(self, x):
        return self.fc(x)


@declare("TmpGate", paper="Nobody, A test block, 2026", params=(Param("t", "a number > 0"),),
         aliases=("TmpGateAttention",), gate_maps={"channel": ("gain", "gate")}, example_args=(2.0,),
         helpers=(TmpProjection,))
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


def test_a_block_declared_in_one_file_works_everywhere(new_block, tmp_path, capsys):
    cls = new_block
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
