"""Verification of an exported detector against its PyTorch model on real images, one loop for every runtime.

``verify_exported`` runs the exported file in a runtime (``attn_yolo.export.runtime``: onnxruntime, OpenVINO CPU,
TensorRT) on real, letterboxed images and compares it with the PyTorch model (eval mode, same input tensor), with the
checks of ``attn_yolo.export.checks`` (``raw`` head outputs, ``nms`` detections) after a format's own load check
(``onnx.checker``; OpenVINO's ``read_model`` + ``compile_model``; TensorRT's engine load). ``verify_onnx``,
``verify_openvino`` and ``verify_engine`` read how the file was exported and call it.

Static exports are checked at the export size, batch 1. Dynamic exports (``dynamic=True``) also at batch 3 and at two
other sizes, one square and one rectangular (``other_sizes``). The report (``attn_yolo.export.report``) is printed and
saved as ``<stem>.verify.json`` next to the file; a failed check makes ``main`` return 1 and keeps the file.
"""

from __future__ import annotations

import numpy as np
import torch

from attn_yolo.checkpoint import load_yolo
from attn_yolo.export.checks import IOU_MIN, RAW_SCALE, TOLERANCE, Check, compare_detections, compare_raw
from attn_yolo.export.report import VerifyReport
from attn_yolo.export.runtime import open_runtime
from attn_yolo.images import default_images, read_image, read_sources
from attn_yolo.progress import bar


def load_images(source=None) -> list[tuple[str, np.ndarray]]:
    """Read ``source`` (image file, folder, glob, or a list of them; None: Ultralytics' ``bus.jpg`` and ``zidane.jpg``)
    as ``[(name, BGR)]``, with the same reader as ``attn-yolo heatmap``.

    Raises:
        ValueError: a path that does not exist, a folder without images, a file OpenCV cannot read.
    """
    return [(p.name, read_image(p)) for p in read_sources(source)]


def letterbox_batch(images: list[np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    """Letterbox BGR images to exactly ``shape`` (h, w) as Ultralytics' predictor does: ``(B, 3, h, w)`` RGB, [0, 1]."""
    from ultralytics.data.augment import LetterBox

    lb = LetterBox(new_shape=shape, auto=False)
    x = np.stack([lb(image=im)[..., ::-1].transpose(2, 0, 1) for im in images])
    return np.ascontiguousarray(x, dtype=np.float32) / 255.0


def other_sizes(shape: tuple[int, int], stride: int = 32) -> list[tuple[int, int]]:
    """Two sizes besides the export size for a dynamic check: square-ish 1.25x, and rectangular 0.75h x 1.25w.

    Multiples of ``stride``; e.g. 640 → (800, 800), (480, 800); 128 → (160, 160), (96, 160).
    """
    r = lambda v: max(stride, round(v / stride) * stride)  # noqa: E731
    h, w = shape
    return [(r(1.25 * h), r(1.25 * w)), (r(0.75 * h), r(1.25 * w))]



@torch.inference_mode()
def torch_raw(model: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    """Run the PyTorch detection model (eval) on ``x``; its raw head output ``(B, 4 + nc, anchors)`` as float32."""
    p = next(model.parameters())
    y = model.eval()(torch.from_numpy(x).to(p.device, p.dtype))
    y = y[0] if isinstance(y, (list, tuple)) else y
    return y.float().cpu().numpy()




def _model_name(model) -> str:
    return str(getattr(model, "ckpt_path", None) or getattr(model, "model_name", None) or model)


def verify_exported(
    fmt: str,
    path,
    info: dict,
    model,
    source=None,
    conf: float = 0.25,
    iou: float = 0.7,
    tol: float | None = None,
    sizes: list[tuple[int, int]] | None = None,
    trust: bool = False,
    load_check=None,
    device: str = "cpu",
    threads: int | None = None,
    compare=None,
) -> VerifyReport:
    """Verify the exported ``path`` (format ``fmt``, exported as ``info`` says) against its PyTorch ``model``.

    Args:
        fmt: ``onnx``, ``openvino`` or ``engine``: picks the runtime (``open_runtime``).
        info: ``{"opset", "dynamic", "precision", "imgsz", "stride"}`` (``onnx_info``, ``openvino_info``, ...).
        model: the PyTorch model it was exported from (path, YAML or ``YOLO``).
        source: images (file, directory or list); None: the first 2 validation images of the model's own dataset
            when it is at hand (``images.default_images``), else Ultralytics' ``bus.jpg`` and ``zidane.jpg``.
        conf, iou: NMS thresholds of the detection check.
        tol: raw-output tolerance; None: ``TOLERANCE[precision]``.
        sizes: extra (h, w) sizes for a dynamic file; None: ``other_sizes(export size)``.
        trust: unpickle a checkpoint path fully (may run code it contains); else weights-only.
        load_check: None, or a function ``path -> Check`` run first (``onnx.checker``).
        device: where the PyTorch model runs (``cuda:0`` for TensorRT).
        threads: the runtime's CPU threads (default torch's count).
        compare: None (``raw`` and ``nms`` as described), or ``fn(ref, out, conf, iou, label) -> [Check]`` for
            another precision's checks (INT8: ``attn_yolo.export.int8_verify.int8_checks``).

    Returns:
        VerifyReport: ``.passed``, ``.checks``, ``.summary()``, ``.save()``. Checks: the load check; the runtime's
        load (a failure ends the report); per case (batch x size) ``raw`` and ``nms``. Static: batch 1 at the export
        size (each image). Dynamic: also batch 3 (images cycled) at the export size, batch 1 at each extra size,
        batch 3 at the last (rectangular) one.
    """
    tol = TOLERANCE[info["precision"]] if tol is None else tol
    yolo = load_yolo(model, trust=trust)
    images = load_images(default_images(yolo)[0] if source is None else source)
    report = _new_report(fmt, path, info, model, images, tol, conf, iou)
    if load_check is not None:
        report.checks.append(load_check(path))
    torch_model = yolo.model.to(device)
    rt = _open_runtime(report, fmt, path, info["precision"], threads)
    if rt is None:  # the runtime could not load the file: nothing else can run
        return report
    for batch, hw in bar(_cases(info, sizes), f"verify {fmt}", unit="case"):
        report.checks += _check_case(rt, torch_model, images, batch, hw, compare, conf, iou, tol)
    return report


def _new_report(fmt: str, path, info: dict, model, images, tol: float, conf: float, iou: float) -> VerifyReport:
    """The report's header, before any check: the file, how it was exported, the images and the tolerances."""
    return VerifyReport(
        file=str(path),
        model=_model_name(model),
        opset=info["opset"],
        dynamic=info["dynamic"],
        precision=info["precision"],
        export_imgsz=info["imgsz"],
        images=[n for n, _ in images],
        tolerance={"raw_rel": tol, "raw_definition": RAW_SCALE, "conf": conf, "iou": iou, "iou_min": IOU_MIN},
        format=fmt,
    )


def _cases(info: dict, sizes) -> list[tuple[int, tuple[int, int]]]:
    """``[(batch, (h, w))]`` to check: batch 1 at the export size; dynamic: also batch 3 there, batch 1 at each extra
    size and batch 3 at the last one."""
    shape = tuple(info["imgsz"])
    cases = [(1, shape)]
    if info["dynamic"]:
        extra = other_sizes(shape, info["stride"]) if sizes is None else [tuple(s) for s in sizes]
        cases += [(3, shape), *((1, s) for s in extra), (3, extra[-1])]
    return cases


def _open_runtime(report: VerifyReport, fmt: str, path, precision: str, threads: int | None):
    """Load ``path`` in its runtime and record the load in ``report``; None (and a failed check) if it cannot."""
    step = {"onnx": "onnxruntime", "openvino": "openvino.load", "engine": "tensorrt"}.get(fmt, fmt)
    try:
        rt = open_runtime(fmt, path, precision, threads)
    except Exception as e:  # the runtime cannot load the file (unknown op, bad graph, corrupt weights)
        report.checks.append(Check(step, "", False, detail={"message": f"{type(e).__name__}: {e}"}, label=fmt))
        return None
    report.runtime = rt.description
    if fmt == "openvino":  # OpenVINO's own load step passed: read + compile
        report.checks.append(Check(step, "", True, detail={"message": "read_model + compile_model(CPU) ok"},
                                   label=rt.label))
    return rt


def _check_case(rt, torch_model, images, batch: int, hw, compare, conf: float, iou: float, tol: float) -> list[Check]:
    """The checks of one case (``batch`` images at size ``hw``): ``compare``'s, else ``raw`` and, when the raw output
    has class scores, ``nms``; a ``run`` failure if the runtime cannot run that shape."""
    groups = [[im] for _, im in images] if batch == 1 else [[images[i % len(images)][1] for i in range(batch)]]
    case = f"b{batch} {hw[0]}x{hw[1]}" + (f" ({len(groups)} images)" if batch == 1 else "")
    ref, out = [], []
    try:
        for g in groups:
            x = letterbox_batch(g, hw)
            ref.append(torch_raw(torch_model, x))
            out.append(rt.run(x))
    except Exception as e:  # runtime error at this shape (e.g. a Reshape frozen at the export size)
        msg = " ".join(f"{type(e).__name__}: {e}".split())[:500]
        return [Check("run", case, False, detail={"message": msg}, label=rt.label)]
    ref, out = np.concatenate(ref), np.concatenate(out)
    if compare is not None:
        checks = list(compare(ref, out, conf, iou, rt.label))
        for c in checks:
            c.case = f"{case} {c.case}".strip()
        return checks
    raw = compare_raw(ref, out, tol, rt.label)
    raw.case = case
    if "scores" not in raw.detail:
        return [raw]
    sc = raw.detail["scores"]  # score flips allowed up to the measured difference, at most the tolerance
    nms = compare_detections(ref, out, conf, iou, min(sc["max_abs"], tol * sc["scale"]), rt.label)
    nms.case = case
    return [raw, nms]


def _onnx_checker(path) -> Check:
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
        return Check("onnx.checker", "", True, detail={"message": "check_model(full_check=True) ok"}, label="onnx")
    except Exception as e:  # onnx.checker.ValidationError, shape inference errors
        return Check("onnx.checker", "", False, detail={"message": f"{type(e).__name__}: {e}"}, label="onnx")


def verify_onnx(onnx_path, model, **kw) -> VerifyReport:
    """Verify an exported detection ``.onnx`` against its PyTorch ``model`` in onnxruntime (CPU provider).

    Opset, dynamic axes, precision and export size are read from the file (``onnx_info``); ``onnx.checker``
    (``full_check=True``) runs first. Keywords: those of ``verify_exported`` (``source``, ``conf``, ``iou``, ``tol``,
    ``sizes``, ``trust``, ``threads``).
    """
    from attn_yolo.export.onnx_export import onnx_info

    return verify_exported("onnx", onnx_path, onnx_info(onnx_path), model, load_check=_onnx_checker, **kw)


def verify_openvino(path, model, **kw) -> VerifyReport:
    """Verify an OpenVINO IR (the ``.xml`` or its ``*_openvino_model`` folder) against its PyTorch ``model`` on
    OpenVINO's CPU plugin (fp32 IR: f32 inference; fp16 IR: f16 asked, what ran is in ``report.runtime``).

    Dynamic shape, precision and export size are read from the IR (``openvino_info``). Keywords: those of
    ``verify_exported``.

    Raises:
        ValueError: not an OpenVINO IR.
    """
    from attn_yolo.export.openvino_export import openvino_info, openvino_xml

    xml = openvino_xml(path)
    return verify_exported("openvino", xml, openvino_info(xml), model, **kw)


def verify_engine(path, model, device: str = "cuda:0", **kw) -> VerifyReport:
    """Verify a TensorRT ``.engine`` against its PyTorch ``model``, both on CUDA ``device`` (PyTorch in fp32).

    Raises:
        NoCudaError: no CUDA device.
        ValueError: not an Ultralytics engine.
    """
    from attn_yolo.export.tensorrt_export import engine_info, require_cuda

    require_cuda()
    return verify_exported("engine", path, engine_info(path), model, device=device, **kw)
