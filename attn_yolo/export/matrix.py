"""The export matrix: every block × format × shape mode exported, verified against PyTorch and recorded.

Formats and modes: ONNX opset × static/dynamic in onnxruntime; OpenVINO static/dynamic/FP16. Each cell is recorded
PASS / FAIL / not supported with the reason.

Each block sits in a tiny detector (``tiny_yaml``: three stride-2 convs, the block at P3, two more convs, Detect on
P3-P5, nc=2) made informative without training (``calibrate``), so the raw and NMS checks compare real detections.
A cell is

* ``PASS``: exported, and every check that ran passed (``nms`` may be NOT RUN: then the cell says so);
* ``FAIL``: the export raised, the runtime could not load it, or a check failed (the first failure is the reason);
* ``not supported``: refused before exporting, by ``check_opset`` (a block newer than the opset) or because the
  runtime cannot load that opset.

``matrix_markdown`` renders the table; ``write_section`` puts it into ``BENCHMARKS.md`` between two markers
(``python scripts/export_matrix.py``).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attn_yolo.nn.declaration import LiveMapping, blocks

BLOCK_ARGS: LiveMapping = LiveMapping(lambda: {n: list(d.example_args) for n, d in blocks(controls=False).items()})
"""YAML args of each block on the tiny model's 32-channel P3 (the declarations' ``example_args``; EMA,
ShuffleAttention: 4 channels a group; BiLevelRoutingAttention: 2 heads of 16, a 7 × 7 grid of regions)."""

IMGSZ = 96
"""Export size of every cell (P3 12×12; a dynamic cell is also checked at batch 3, 128×128 and 64×128)."""

BEGIN, END = "<!-- export-matrix:begin -->", "<!-- export-matrix:end -->"
INT8_MARKERS = ("<!-- int8-matrix:begin -->", "<!-- int8-matrix:end -->")
"""Markers of the INT8 matrix section in ``docs/benchmarks/int8.md`` (``scripts/export_matrix.py int8=True``)."""
"""Markers around the table in ``BENCHMARKS.md``; ``write_section`` replaces what is between them."""


@dataclass
class Cell:
    """One matrix cell: a block exported one way, and what verification said."""

    block: str
    fmt: str  # onnx | openvino
    variant: str  # onnx: "opset 17 static"; openvino: "static", "dynamic", "fp16 dynamic"
    status: str = ""  # PASS | FAIL | not supported
    reason: str = ""
    raw_rel: float | None = None  # worst raw rel difference over the cases
    matched: int = 0  # NMS detections matched over the cases
    seconds: float = 0.0
    latency_ratio: float | None = None  # INT8 cells: INT8 / fp32 latency, paired in one run

    @property
    def column(self) -> str:
        return f"{'ORT' if self.fmt == 'onnx' else 'OpenVINO'} {self.variant}"


def tiny_yaml(block: str) -> dict:
    """Three stride-2 convs, ``block`` at P3 (stride 8), two more convs (P4, P5), Detect on P3-P5; nc=2."""
    return {
        "nc": 2,
        "backbone": [
            [-1, 1, "Conv", [16, 3, 2]],
            [-1, 1, "Conv", [32, 3, 2]],
            [-1, 1, "Conv", [32, 3, 2]],
            [-1, 1, block, BLOCK_ARGS[block]],
            [-1, 1, "Conv", [64, 3, 2]],
            [-1, 1, "Conv", [64, 3, 2]],
        ],
        "head": [[[3, 4, 5], 1, "Detect", ["nc"]]],
    }


def calibrate(yolo, imgsz: int = IMGSZ, boxes: int = 20) -> None:
    """Make a random detector's outputs depend on its input, so the checks compare real detections.

    In a random detector activations shrink layer by layer and class scores sit at the bias init (about 1e-3), below
    any threshold. Each BatchNorm is rescaled to unit output std on bus.jpg and zidane.jpg (one scalar per layer, as
    LSUV init, Mishkin & Matas 2016), then each Detect level's last class conv to unit logit std, with a bias that
    lets about ``boxes`` scores exceed 0.25.
    """
    from attn_yolo.export.verify import letterbox_batch, load_images, torch_raw

    ims = [im for _, im in load_images()]

    def unit_std(bn, inp, out):
        s = float(out.std())
        bn.weight.data /= s
        bn.bias.data /= s
        return out / s

    hooks = [m.register_forward_hook(unit_std) for m in yolo.model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    torch_raw(yolo.model, letterbox_batch(ims, (imgsz, imgsz)))
    for h in hooks:
        h.remove()
    convs = [seq[-1] for seq in yolo.model.model[-1].cv3]
    logits = {}

    def keep(conv, inp, out):
        logits[conv] = out - conv.bias.view(1, -1, 1, 1)

    hooks = [c.register_forward_hook(keep) for c in convs]
    torch_raw(yolo.model, letterbox_batch(ims[:1], (imgsz, imgsz)))
    for h in hooks:
        h.remove()
    scaled = {c: 1.0 / float(logits[c].std()) for c in convs}
    allv = torch.cat([(logits[c] * scaled[c]).flatten() for c in convs])
    bias = float(np.log(0.25 / 0.75)) - float(torch.quantile(allv, 1 - boxes / allv.numel()))
    for c in convs:
        c.weight.data *= scaled[c]
        c.bias.data.fill_(bias)


def opsets() -> list[int]:
    """17, 18 and the newest opset both Ultralytics' exporter (torch's TorchScript exporter) and onnxruntime take."""
    from attn_yolo.export.onnx_export import max_opset
    from attn_yolo.export.runtime import ort_max_opset

    return sorted({17, 18, min(max_opset(), ort_max_opset())})


def variants() -> list[tuple[str, str]]:
    """The matrix columns: ``(fmt, variant)``."""
    onnx = [("onnx", f"opset {o} {s}") for o in opsets() for s in ("static", "dynamic")]
    return onnx + [("openvino", v) for v in ("static", "dynamic", "fp16 dynamic")]


@contextlib.contextmanager
def _quiet():
    """Ultralytics' logger at WARNING and tracer warnings off (the exporter logs a dozen lines per model)."""
    from ultralytics.utils import LOGGER

    level = LOGGER.level
    LOGGER.setLevel("WARNING")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        LOGGER.setLevel(level)


def _model(block: str, folder: Path) -> str:
    """A calibrated tiny checkpoint holding ``block`` (seed 0), saved in ``folder``."""
    import yaml
    from ultralytics import YOLO

    from attn_yolo.registry import register

    register()
    pt = folder / f"tiny-{block}.pt"
    if not pt.exists():
        (folder / f"tiny-{block}.yaml").write_text(yaml.safe_dump(tiny_yaml(block)))
        torch.manual_seed(0)
        y = YOLO(str(folder / f"tiny-{block}.yaml"))
        calibrate(y)
        y.save(str(pt))
    return str(pt)


INT8_VARIANTS = [("onnx", "int8 static"), ("openvino", "int8 static")]
"""INT8 columns (``scripts/export_matrix.py int8=True``; not among ``variants()``): Ultralytics' ``quantize=8``
calibrated on 8 synthetic-shapes images, checked by ``attn_yolo.export.int8_verify`` (the tiny model is untrained,
so its mAP check compares two near-zero figures: the cell tells that the export runs and how fast)."""


def _int8_cell(cell: Cell, pt: str, folder: Path) -> Cell:
    """Export and verify one INT8 cell; PASS shows the INT8/fp32 latency ratio."""
    from ultralytics import YOLO

    from attn_yolo.export.int8 import export_int8
    from attn_yolo.export.int8_verify import verify_int8
    from attn_yolo.synthetic import generate

    data = str(generate(folder.parent / "int8-data", n_train=8, n_val=4, imgsz=IMGSZ, seed=0))
    yolo = YOLO(pt)
    tag = "int8.onnx" if cell.fmt == "onnx" else "int8_openvino_model"
    f, _ = export_int8(yolo, cell.fmt, IMGSZ, data, out=folder / f"{cell.block}-{tag}", overwrite=True)
    report = verify_int8(cell.fmt, f, yolo, data, max_drop=100.0, n_boot=200)
    cell.latency_ratio = report.int8["latency"]["ratio"]
    return _record(cell, report)


def _record(cell: Cell, report) -> Cell:
    """A cell's status, worst raw difference and matched detections from its verification report."""
    from attn_yolo.export.report import failure_text

    raws = [c.value for c in report.checks if c.name == "raw" and c.value is not None]
    cell.raw_rel = max(raws) if raws else None
    cell.matched = sum(c.detail.get("matched", 0) for c in report.checks if c.name == "nms")
    if report.passed:
        cell.status = "PASS"
        if report.not_run:
            cell.reason = f"{len(report.not_run)} nms check(s) NOT RUN: no detections to compare"
    else:
        cell.status = "FAIL"
        cell.reason = "; ".join(failure_text(c) for c in report.failures[:2])
    return cell


def run_cell(block: str, fmt: str, variant: str, folder) -> Cell:
    """Export ``block``'s tiny model one way (``fmt``, ``variant`` as in ``variants()``) under ``folder``, verify it,
    and record the result. Never raises for an export or verification failure: that is the cell's ``FAIL``."""
    from attn_yolo.export.onnx_export import OpsetError, check_opset, export_onnx
    from attn_yolo.export.openvino_export import export_openvino
    from attn_yolo.export.runtime import ort_max_opset
    from attn_yolo.export.verify import verify_onnx, verify_openvino

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cell = Cell(block, fmt, variant)
    t0 = time.perf_counter()
    pt = _model(block, folder)
    dynamic = "dynamic" in variant
    tag = variant.replace(" ", "-")
    with _quiet():
        try:
            if variant.startswith("int8"):
                return _int8_cell(cell, pt, folder)
            if fmt == "onnx":
                opset = int(variant.split()[1])
                from ultralytics import YOLO

                try:
                    check_opset(YOLO(pt).model, opset)
                except OpsetError as e:
                    cell.status, cell.reason = "not supported", str(e)
                    return cell
                if opset > ort_max_opset():
                    cell.status = "not supported"
                    cell.reason = f"onnxruntime loads opsets up to {ort_max_opset()}"
                    return cell
                f = export_onnx(pt, IMGSZ, dynamic=dynamic, opset=opset, simplify=False,
                                out=folder / f"{block}-{tag}.onnx", overwrite=True)
                report = verify_onnx(f, pt)
            else:
                f = export_openvino(pt, IMGSZ, dynamic=dynamic, half="fp16" in variant,
                                    out=folder / f"{block}-{tag}_openvino_model", overwrite=True)
                report = verify_openvino(f, pt)
        except Exception as e:  # an export that raises is the cell's result, recorded
            cell.status, cell.reason = "FAIL", f"export: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
            return cell
        finally:
            cell.seconds = time.perf_counter() - t0
    return _record(cell, report)


def run_matrix(blocks=None, columns=None, folder=None, progress=None) -> list[Cell]:
    """Every cell of ``blocks`` (default all of ``attn_yolo.registry.MODULES``) × ``columns`` (default
    ``variants()``), in a temporary folder unless ``folder``; ``progress(cell)`` after each."""
    from attn_yolo.registry import MODULES

    blocks = list(MODULES) if blocks is None else list(blocks)
    columns = variants() if columns is None else list(columns)
    out = []
    with tempfile.TemporaryDirectory(prefix="attn-yolo-matrix-") as tmp:
        root = Path(folder) if folder is not None else Path(tmp)
        for b in blocks:
            for fmt, v in columns:
                c = run_cell(b, fmt, v, root / b)
                out.append(c)
                if progress is not None:
                    progress(c)
    return out


def matrix_markdown(cells: list[Cell], header: str = "") -> str:
    """The matrix as Markdown: a row per block, a column per way of exporting; each cell ``PASS`` (worst raw rel
    difference), ``FAIL`` or ``not supported``, with a numbered note giving the reason."""
    cols = list(dict.fromkeys(c.column for c in cells))
    blocks = list(dict.fromkeys(c.block for c in cells))
    by = {(c.block, c.column): c for c in cells}
    notes, rows = [], []
    for b in blocks:
        row = [b]
        for col in cols:
            c = by.get((b, col))
            if c is None:
                row.append("")
                continue
            text = c.status + (f" {c.raw_rel:.0e}" if c.status == "PASS" and c.raw_rel is not None else "")
            if c.status == "PASS" and c.latency_ratio is not None:
                text = f"PASS ×{c.latency_ratio:.2f}"
            if c.reason:
                notes.append(f"{len(notes) + 1}. {b}, {col}: {c.status}: {c.reason}")
                text += f" ({len(notes)})"
            row.append(text)
        rows.append(row)
    n = {s: sum(c.status == s for c in cells) for s in ("PASS", "FAIL", "not supported")}
    tally = f"{len(cells)} cells: {n['PASS']} PASS, {n['FAIL']} FAIL, {n['not supported']} not supported."
    table = ["| block | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    table += ["| " + " | ".join(r) + " |" for r in rows]
    parts = [header, tally, "", *table]
    if notes:
        parts += ["", "Notes:", "", *notes]
    return "\n".join(p for p in parts if p is not None).strip() + "\n"


def write_section(path, body: str, markers: tuple[str, str] = (BEGIN, END),
                  title: str = "Export matrix (`scripts/export_matrix.py`)") -> None:
    """Replace what lies between the ``markers`` (default ``BEGIN``, ``END``) in ``path`` with ``body`` (appending a
    new section ``## title`` with the markers if the file has none)."""
    from attn_yolo.files import atomic_write

    begin, finish = markers
    p = Path(path)
    text = p.read_text() if p.exists() else ""
    block = f"{begin}\n{body.rstrip()}\n{finish}"
    if begin in text and finish in text:
        start, end = text.index(begin), text.index(finish) + len(finish)
        text = text[:start] + block + text[end:]
    else:
        text = text.rstrip() + f"\n\n## {title}\n\n" + block + "\n"
    atomic_write(p, lambda t: Path(t).write_text(text))


def read_section(path) -> dict[tuple[str, str], str]:
    """``{(block, column): status}`` of the table between the markers in ``path`` (empty if none)."""
    text = Path(path).read_text() if Path(path).exists() else ""
    if BEGIN not in text:
        return {}
    lines = [ln for ln in text[text.index(BEGIN):text.index(END)].splitlines() if ln.startswith("|")]
    head = [h.strip() for h in lines[0].strip("|").split("|")]
    out = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        for col, v in zip(head[1:], cells[1:]):
            status = "not supported" if v.startswith("not supported") else v.split(" ")[0]
            out[(cells[0], col)] = status
    return out
