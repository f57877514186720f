"""scripts/gpu_check.py: a clear, immediate exit without CUDA; its training and ablation checks run (on CPU, where
they must report AMP as off)."""

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_check.py"


def test_fails_fast_without_cuda():
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    assert "gpu_check: no CUDA device" in r.stderr and "run it on a machine with an NVIDIA GPU" in r.stderr
    assert r.stdout == "" and time.perf_counter() - t0 < 60  # before any work


def test_checks_run_and_catch_amp_off_on_cpu(tmp_path):
    from attn_yolo.synthetic import generate

    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    data = str(generate(tmp_path / "data", n_train=4, n_val=2, imgsz=64, seed=0))
    tiny = {"imgsz": 32, "batch": 2, "workers": 0}
    models = {"yolo11n + CBAM": gpu_check.MODELS["yolo11n + CBAM"]}
    table, ok = gpu_check.amp_training_section("cpu", data, tmp_path, ["fp16"], models=models, **tiny)
    row = table.splitlines()[2].split(" | ")
    assert not ok and row[:3] == ["| fp16", "yolo11n + CBAM", "off"]  # Ultralytics turns AMP off on CPU: caught
    assert "AMP off" in row[-1] and (tmp_path / "amp-fp16-yolo11n-cbam" / "weights" / "best.pt").exists()

    text, ok = gpu_check.ablation_section("cpu", data, tmp_path, **tiny)
    assert ok and text.startswith("exit code 0") and text.count("| ok | cpu |") == 2


def test_deploy_section_runs_on_cpu_with_openvino(tmp_path):
    """The TensorRT section's code (export fp16, verify against PyTorch, time both), run on CPU with OpenVINO in place
    of the engine: every row verified and timed."""
    import pytest

    pytest.importorskip("openvino")
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    import yaml

    from attn_yolo.export.matrix import tiny_yaml

    (tmp_path / "tiny-cbam.yaml").write_text(yaml.safe_dump(tiny_yaml("CBAM")))  # yolo11n would cost minutes here
    models = {"tiny + CBAM": tmp_path / "tiny-cbam.yaml"}
    table, ok = gpu_check.deploy_section("cpu", tmp_path, fmt="openvino", models=models, imgsz=96, repeats=2)
    row = table.splitlines()[2].split(" | ")
    assert ok and row[:3] == ["| tiny + CBAM", "openvino fp16", "96"] and row[3].startswith("PASS 3/3"), table
    assert int(row[5]) > 0  # detections compared
    assert float(row[6]) > 0 and float(row[7]) > 0 and row[-1] == "pass |"
    assert list(tmp_path.glob("*_openvino_model/*.verify.json"))
