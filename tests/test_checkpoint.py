"""A model with the blocks trains with Ultralytics' trainer and its best.pt reloads in a fresh process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(code: str, cwd, **env) -> str:
    """Run Python code in a fresh interpreter (no attn_yolo imported unless the code does it); return stdout."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=600, env={**os.environ, **env}
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module")
def best_pt(coco_few, tmp_path_factory) -> Path:
    """1 epoch of yolo11n-cbam-mhsa-like training on 8 COCO128 images through the `attn-yolo train` CLI."""
    project = tmp_path_factory.mktemp("runs")
    cmd = [
        sys.executable, "-m", "attn_yolo_console", "train", f"model={REPO / 'models/yolo11n-cbam.yaml'}",
        f"data={coco_few}", "epochs=1", "imgsz=64", "batch=4", "workers=0", "device=cpu", "plots=False",
        f"project={project}", "name=ckpt", "exist_ok=True", "amp=False",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=project)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    best = project / "ckpt" / "weights" / "best.pt"
    assert best.exists()
    return best


def test_reload_predict_val_train_in_fresh_process(best_pt, coco_few, assets, tmp_path):
    code = f"""
import sys
from ultralytics import YOLO
assert 'attn_yolo' not in sys.modules
model = YOLO({str(best_pt)!r})
assert 'attn_yolo' in sys.modules  # imported by unpickling the blocks
names = [type(m).__name__ for m in model.model.modules()]
r = model.predict({str(assets / 'bus.jpg')!r}, imgsz=64, verbose=False)[0]
print('cbam', names.count('CBAM'), 'orig_shape', r.orig_shape)
m = model.val(data={str(coco_few)!r}, imgsz=64, batch=4, workers=0, plots=False, verbose=False,
              project={str(tmp_path)!r}, name='val')
print('map50', m.box.map50)
model.train(data={str(coco_few)!r}, epochs=1, imgsz=64, batch=4, workers=0, plots=False, amp=False,
            project={str(tmp_path)!r}, name='again', exist_ok=True)
print('retrained', sum(type(x).__name__ == 'CBAM' for x in model.model.modules()))
"""
    out = run(code, tmp_path)
    assert "cbam 3 orig_shape (1080, 810)" in out
    assert "map50" in out and "retrained 3" in out


def test_reload_with_safe_load(best_pt, assets, tmp_path):
    code = f"""
import attn_yolo
from ultralytics import YOLO
from ultralytics.nn.tasks import _SafeLoad
assert _SafeLoad.restricted()
model = YOLO({str(best_pt)!r})
r = model.predict({str(assets / 'zidane.jpg')!r}, imgsz=64, verbose=False)[0]
print('ok', sum(type(m).__name__ == 'CBAM' for m in model.model.modules()), r.orig_shape)
"""
    assert "ok 3 (720, 1280)" in run(code, tmp_path, ULTRALYTICS_SAFE_LOAD="1")


@pytest.fixture(scope="module")
def saved_pt(tmp_path_factory) -> Path:
    """yolo11n-cbam as attn-yolo's tools save it (``save_checkpoint``, Ultralytics' checkpoint fields); no data."""
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.checkpoint import save_checkpoint

    return save_checkpoint(DetectionModel(str(REPO / "models/yolo11n-cbam.yaml"), verbose=False),
                           tmp_path_factory.mktemp("ckpt") / "cbam.pt")


def test_safe_load_without_plugin_names_the_plugin_class(saved_pt, tmp_path):
    """ULTRALYTICS_SAFE_LOAD=1 in a process that never imports attn_yolo: no plugin code can run there (the
    weights-only unpickler imports nothing and Ultralytics loads no plugins), and Ultralytics replaces torch's error
    with its own fixed text. What reaches the user is torch's error, chained as the cause, naming the block's class
    path ``attn_yolo.nn.cbam.CBAM``; importing it, as torch's hint says, registers every block, and the load works."""
    code = f"""
import sys
from ultralytics import YOLO
try:
    YOLO({str(saved_pt)!r})
except TypeError as e:
    assert 'attn_yolo' not in sys.modules
    print('ultralytics:', e)
    print('cause:', e.__cause__)
import attn_yolo.nn.cbam  # what torch's hint (add_safe_globals([attn_yolo.nn.cbam.CBAM])) needs
model = YOLO({str(saved_pt)!r})
print('loaded', sum(type(m).__name__ == 'CBAM' for m in model.model.modules()))
"""
    out = run(code, tmp_path, ULTRALYTICS_SAFE_LOAD="1")
    assert "references types outside the supported Ultralytics checkpoint format" in out
    assert "Unsupported global: GLOBAL attn_yolo.nn.cbam.CBAM was not an allowed global" in out
    assert "loaded 3" in out


def test_new_blocks_reload_with_safe_load(tmp_path, assets):
    """A checkpoint holding CoordAtt, EMA, SimAM, GAM, ShuffleAttention, TripletAttention, NAM, SKAttention and
    BiLevelRoutingAttention (and every class they pickle) loads under weights-only unpickling in a fresh process."""
    from ultralytics import YOLO

    import attn_yolo

    new = ["CoordAtt", "EMA", "SimAM", "GAM", "ShuffleAttention", "TripletAttention", "NAM", "SKAttention",
           "BiLevelRoutingAttention"]
    attn_yolo.insert("yolo11n.yaml", new, "backbone", out=tmp_path / "yolo11n-seven.yaml")
    YOLO(str(tmp_path / "yolo11n-seven.yaml")).save(tmp_path / "seven.pt")
    code = f"""
import attn_yolo
from ultralytics import YOLO
from ultralytics.nn.tasks import _SafeLoad
assert _SafeLoad.restricted()
model = YOLO({str(tmp_path / 'seven.pt')!r})
r = model.predict({str(assets / 'bus.jpg')!r}, imgsz=64, verbose=False)[0]
print('ok', sorted({{type(m).__name__ for m in model.model.model}} & set(attn_yolo.MODULES)), r.orig_shape)
"""
    assert f"ok {sorted(new)} (1080, 810)" in run(code, tmp_path, ULTRALYTICS_SAFE_LOAD="1")
