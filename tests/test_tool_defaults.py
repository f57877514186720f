"""Verification that verifies: export and heatmap default to the model's own validation images when its dataset is
at hand (else Ultralytics' bus.jpg and zidane.jpg); heatmap gates on a fixed [0, 1] colour scale by default."""

from pathlib import Path

import numpy as np
import pytest

import attn_yolo_console as cli
from attn_yolo.images import default_images, default_sources

REPO = Path(__file__).resolve().parents[1]


def test_default_images_are_the_models_own_val_images(tiny_data, tmp_path):
    from ultralytics.nn.tasks import DetectionModel

    net = DetectionModel(str(REPO / "models" / "yolo11n-se.yaml"), nc=4, verbose=False)
    assert default_images(net)[0] == default_sources()  # built from a YAML: no dataset, the sample photos
    net.args = {"data": str(tiny_data)}  # as Ultralytics sets it when it loads a trained checkpoint
    files, what = default_images(net)
    val = sorted((tiny_data.parent / "images" / "val").iterdir())[:2]
    assert files == val and what == "2 val images of data.yaml"
    net.args = {"data": str(tmp_path / "moved" / "data.yaml")}  # not at hand: the sample photos, nothing downloaded
    assert default_images(net)[0] == default_sources()

    from attn_yolo.heatmap import heatmaps

    net.args = {"data": str(tiny_data)}
    items = heatmaps(net, imgsz=64)
    assert [it.name for it in items] == [f.name for f in val]


def test_heatmap_gates_on_a_fixed_scale(tmp_path, capsys):
    from types import SimpleNamespace

    from attn_yolo.heatmap.figure import colour_range

    gate = SimpleNamespace(kind="spatial", stats={"min": 0.475, "max": 0.509, "mean": 0.49, "flag": ""})
    received = SimpleNamespace(kind="received", stats={"min": 0.2, "max": 3.5, "mean": 1.0, "flag": ""})
    assert colour_range(gate) == (0.0, 1.0) and colour_range(gate, "panel") == (0.475, 0.509)
    assert colour_range(received) == (0.2, 3.5)  # not a gate: its own range

    model = f"model={REPO / 'models' / 'yolo11n-se.yaml'}"
    assert cli.main(["heatmap", model, "imgsz=64", f"out={tmp_path / 'a'}"]) == 0
    assert "colour scale: gate maps on a fixed [0, 1]" in capsys.readouterr().out
    assert cli.main(["heatmap", model, "imgsz=64", f"out={tmp_path / 'b'}", "scale=panel"]) == 0
    assert "each map on its own min..max" in capsys.readouterr().out
    a = np.asarray(__import__("matplotlib.image", fromlist=["imread"]).imread(tmp_path / "a" / "bus_heatmaps.png"))
    b = np.asarray(__import__("matplotlib.image", fromlist=["imread"]).imread(tmp_path / "b" / "bus_heatmaps.png"))
    assert a.shape == b.shape and not np.array_equal(a, b)  # the same maps, coloured differently
    assert cli.main(["heatmap", model, "scale=log", f"out={tmp_path / 'c'}"]) == 2
    assert "scale: 'log'; expected one of fixed, panel" in capsys.readouterr().err


@pytest.mark.parametrize("line", [0])
def test_coco128_quick_says_up_front_what_it_needs(line):
    first = (REPO / "configs" / "ablation" / "coco128-quick.yaml").read_text().splitlines()[line]
    assert first.startswith("# NEEDS A GPU OR PRETRAINED WEIGHTS")
