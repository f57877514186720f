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
