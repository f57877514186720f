"""The ablation's progress display: its phases named (dataset, start, runs), one time left (the runner's, not the
bar's own rate-based one beside it), and every message on a line of its own, never glued into a bar frame by a
carriage-return redraw; off a terminal no carriage return at all."""

import io
import re
import sys

from conftest import write_config

from attn_yolo import ablate
from attn_yolo.ablate.runs import console
from attn_yolo.ablate.runs.records import new_record


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def runner(spec, device):
    return {**new_record(spec, device), "status": "ok", "precision": 0.5, "recall": 0.5, "map50": 0.5,
            "map50_95": 0.3 + 0.001 * spec.seed, "epochs": 1, "best_epoch": 1, "train_time_s": 0.1}


def visible_lines(raw: str) -> list[str]:
    """What a terminal shows: per line, the text after its last carriage return (ANSI erase codes dropped)."""
    raw = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw)
    return [chunk.split("\r")[-1].rstrip() for chunk in raw.split("\n")]


def _run(tmp_path, tiny_data, monkeypatch, stream):
    cfg = write_config(tmp_path, tiny_data, start={"epochs": 1})
    monkeypatch.setattr(sys, "stdout", stream)
    assert ablate.run(cfg, runner=runner) == 0
    monkeypatch.undo()
    return stream.getvalue()


def test_on_a_terminal_phases_are_named_one_eta_and_no_message_is_glued_into_the_bar(tmp_path, tiny_data,
                                                                                    monkeypatch):
    raw = _run(tmp_path, tiny_data, monkeypatch, Terminal())
    shown = visible_lines(raw)
    for text in ("attn-yolo ablate: [start] training the shared start once", "[start] trained once: mAP50-95",
                 "attn-yolo ablate: [runs] 4 run(s) to go", "[done 1/4] variant=baseline seed=0",
                 "[done 4/4] variant=cbam seed=1"):
        assert any(line.startswith(text) for line in shown), (text, shown)  # on a line of its own, at its start
    frames = [f for chunk in raw.split("\n") for f in chunk.split("\r") if "runs, " in f and "elapsed" in f]
    assert frames
    for f in frames:
        assert f.count("ETA") <= 1 and not re.search(r"<\d", f), f  # no second, rate-based time left
    assert any("ETA" in f for f in frames) and any("[runs]" in f for f in frames) and any("[start]" in f for f in
                                                                                           frames)


def test_off_a_terminal_there_are_no_carriage_returns(tmp_path, tiny_data, monkeypatch):
    raw = _run(tmp_path, tiny_data, monkeypatch, io.StringIO())
    assert "\r" not in raw
    assert "attn-yolo ablate: [start] training the shared start once" in raw
    assert re.search(r"attn-yolo ablate: \[runs\] 4 run\(s\) to go, ETA \S+", raw)
    assert raw.count("ETA") == 1  # once, at the runs' start


def test_phase_names_are_checked():
    assert console.phase_line("dataset", "x") == "attn-yolo ablate: [dataset] x"
    try:
        console.phase_line("training", "x")
    except ValueError as e:
        assert "dataset" in str(e)
    else:
        raise AssertionError("an unknown phase was accepted")


def test_the_start_shows_its_epochs_on_the_bar_and_nothing_off_a_terminal(tmp_path):
    """The shared start trains for minutes: its epochs and the time left appear on the bar's line as Ultralytics
    writes results.csv; off a terminal nothing at all."""
    import time

    def train(stream):
        p = console.Progress(4, file=stream)
        p.enter("start", "training the shared start once (start)")
        with p.epochs(tmp_path, 3, every_s=0.05):
            for k in (1, 2):
                with open(tmp_path / "results.csv", "a") as f:
                    f.write("epoch,time\n" * (k == 1) + f"{k},{30.0 * k}\n")
                time.sleep(0.4)
        p.close()
        (tmp_path / "results.csv").unlink()
        return stream.getvalue()

    shown = train(Terminal())
    frames = [f for chunk in shown.split("\n") for f in chunk.split("\r")]
    assert any("epoch 1/3, ~01:00 left" in f for f in frames) and any("epoch 2/3, ~00:30 left" in f for f in frames)
    assert "epoch" not in train(io.StringIO())


def test_a_bar_is_one_redrawn_line_on_a_terminal_and_nothing_elsewhere():
    """attn_yolo.progress.bar (explain, bench, INT8, export checks): tqdm frames on one line of a terminal, cleared at
    the end; not a character into a log or a pipe."""
    from attn_yolo.progress import bar

    term = Terminal()
    assert list(bar(range(3), "explain: errors of each run", unit="run", file=term)) == [0, 1, 2]
    raw = term.getvalue()
    assert "explain: errors of each run" in raw and "\r" in raw and "\n" not in raw.rstrip("\n")
    plain = io.StringIO()
    assert list(bar(range(3), "x", file=plain)) == [0, 1, 2] and plain.getvalue() == ""


def test_a_terminal_without_a_size_still_shows_the_bar():
    """A pseudo-terminal that reports 0 x 0 (``script``, ``docker exec -t``): tqdm alone hides its bar there as off
    the screen; ours is drawn at the fallback size (a new pty has no size until a terminal sets one)."""
    import os

    from attn_yolo.progress import bar

    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as stream:
            assert stream.isatty() and os.get_terminal_size(slave).columns == 0
            for _ in bar(range(3), "probe", file=stream):
                stream.flush()
            p = console.Progress(2, file=stream)
            p.enter("start", "training the shared start once (start)")
            p.close()
            stream.flush()
        os.set_blocking(master, False)
        shown = os.read(master, 65536).decode(errors="replace")
    finally:
        os.close(master)
        os.close(slave)
    assert "probe" in shown and "0/3" in shown
    assert "attn-yolo ablate [start]" in shown and "0/2 runs" in shown
