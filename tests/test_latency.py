"""Latency timed apart from training (attn_yolo.ablate.runs.latency): the load other processes put on the machine is
measured and a busy machine's latencies are not compared (a real busy loop beside the timing), arms of the baseline's
architecture never get a latency verdict, and a real difference does get one."""

import subprocess
import sys
import time

import pytest
import torch

from attn_yolo.ablate.runs import latency


def test_load_meter_counts_other_processes_cores_from_the_machines_busy_time():
    """others = (machine busy CPU s − this process's CPU s) / wall s, against injected clocks."""
    busy, own, wall = iter([100.0, 103.0]), iter([5.0, 6.0]), iter([0.0, 2.0])
    with latency.LoadMeter(reader=lambda: next(busy), own=lambda: next(own), clock=lambda: next(wall)) as m:
        pass
    assert m.others_cores == pytest.approx((3.0 - 1.0) / 2.0) and m.busy  # 1 core ≥ BUSY_CORES
    busy, own, wall = iter([100.0, 101.0]), iter([5.0, 5.9]), iter([0.0, 1.0])
    with latency.LoadMeter(reader=lambda: next(busy), own=lambda: next(own), clock=lambda: next(wall)) as m:
        pass
    assert m.others_cores == pytest.approx(0.1) and not m.busy
    with latency.LoadMeter(reader=lambda: None) as m:  # no /proc/stat: unknown, not "quiet"
        pass
    assert not m.busy and m.others_cores != m.others_cores  # NaN


def _model(width: int):
    return torch.nn.Sequential(torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(width, 8, 3, padding=1)).eval()  # fmt: skip


@pytest.mark.skipif(latency.busy_cpu_s() is None, reason="no /proc/stat")
def test_a_busy_loop_beside_the_timing_is_flagged_and_nothing_is_compared():
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # the loop is spinning
        # a window of tenths of a second: /proc/stat counts in 10 ms ticks, so one of a few ticks (number=5 took
        # 0.03-0.07 s) can miss the loop's share and fail at random; one thread, so that the timing does not
        # oversubscribe the cores the loop (and a test worker beside it) spin on
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            times, meter = latency.time_rounds({"baseline": _model(4), "big": _model(16)}, 32, rounds=3, number=300,
                                               warmup=1)
        finally:
            torch.set_num_threads(threads)
    finally:
        loop.kill()
        loop.wait()
    load = meter.describe()
    assert load["busy"] and load["others_cores"] >= 0.8  # the loop alone keeps one core busy
    words = latency.compare(times, "baseline", load)["big"]
    assert words["words"].startswith("not compared: the machine was busy") and not words["verdict"]


def test_the_baselines_architecture_never_gets_a_latency_verdict():
    """Two arms of one architecture: no verdict whatever the clock says (here a copy 'measured' 40 % slower); an arm
    of another architecture on a quiet machine gets one."""
    assert latency.architecture(_model(8)) == latency.architecture(_model(8)) != latency.architecture(_model(9))
    times = {"baseline": [10.0, 10.2, 9.9, 10.1], "copy": [14.0, 14.1, 13.9, 14.2], "other": [14.0, 14.1, 13.9, 14.2]}
    quiet = {"busy": False, "others_cores": 0.0, "cores": 2}
    out = latency.compare(times, "baseline", quiet, same={"copy"})
    assert out["copy"]["words"].startswith("not compared: the same architecture") and not out["copy"]["verdict"]
    assert out["other"]["words"] == "higher" and out["other"]["verdict"]
    d = [14.0 - 10.0, 14.1 - 10.2, 13.9 - 9.9, 14.2 - 10.1]
    assert out["other"]["mean"] == pytest.approx(sum(d) / 4)


def test_a_difference_within_the_resolution_is_no_verdict():
    times = {"baseline": [10.0, 10.0, 10.0], "x": [10.1, 10.11, 10.12]}  # 1 % slower, tight: within RESOLUTION
    out = latency.compare(times, "baseline", {"busy": False, "others_cores": 0.0, "cores": 2})["x"]
    assert out["words"] == f"no difference beyond ±{latency.RESOLUTION * 10:.2f} ms" and not out["verdict"]
