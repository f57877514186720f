"""The runtimes that run an exported detector for verification and latency: onnxruntime, OpenVINO CPU, TensorRT.

Each is a small object with ``label`` (how reports name the exported side), ``description`` (the runtime and its
settings, printed in the report) and ``run(x)``: ``x`` a ``(B, 3, h, w)`` float32 array in [0, 1] → the raw head
output ``(B, 4 + nc, anchors)`` as float32. ``open_runtime(format, path)`` picks one; the checks
(``attn_yolo.export.checks``) and the verification loop (``attn_yolo.export.verify``) are the same for all.

* ``OrtRuntime``: an onnxruntime ``InferenceSession`` on the CPU provider.
* ``OpenVINORuntime``: ``openvino.Core().compile_model(xml, "CPU")``. Its inference precision is set, not left to the
  CPU plugin, which picks bf16 (AMX / AVX-512 BF16) or f16 (AVX-512 FP16) by itself on CPUs that have them. Every IR
  runs in f32, the fp16 one (``half=True``: weights stored fp16) too, so its check measures the fp16 weights on every
  CPU: asked for f16, the plugin runs bf16 (8-bit mantissa) where the CPU has AVX-512 BF16 but no FP16 arithmetic
  (AMD Zen 4), a precision the IR never asked for, beyond the fp16 tolerance (scores 0.11 off on the test's
  every-block model, against 4e-3 for the fp16 weights in f32).
* ``EngineRuntime``: a TensorRT ``.engine`` through Ultralytics' ``AutoBackend`` on a CUDA device (bindings, fp16
  input), so no TensorRT code of our own.
"""

from __future__ import annotations

import time

import numpy as np
import torch


def ort_session(onnx_path, threads: int | None = None):
    """onnxruntime ``InferenceSession`` on the CPU provider (``threads``: intra-op threads, default torch's count)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads or torch.get_num_threads()
    so.log_severity_level = 3
    return ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])


def ort_raw(sess, x: np.ndarray) -> np.ndarray:
    """Run an ONNX detection model on ``x`` ``(B, 3, h, w)``; its first output ``(B, 4 + nc, anchors)`` as float32."""
    return np.asarray(sess.run(None, {sess.get_inputs()[0].name: x})[0], dtype=np.float32)


def ort_max_opset() -> int:
    """The newest default-domain ONNX opset the installed onnxruntime loads, probed: a one-node model (Relu) of each
    opset from the ``onnx`` package's newest down, until an ``InferenceSession`` accepts one."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", vi[:1], vi[1:])
    so = ort.SessionOptions()
    so.log_severity_level = 4
    for opset in range(onnx.defs.onnx_opset_version(), 6, -1):
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=onnx.IR_VERSION)
        try:
            ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
            return opset
        except Exception:  # onnxruntime: opset newer than it was built for, or IR version too new
            continue
    return 7


class OrtRuntime:
    """An ``.onnx`` in onnxruntime (CPU provider, ``threads`` intra-op threads; default torch's count)."""

    label = "onnx"

    def __init__(self, path, threads: int | None = None):
        import onnxruntime as ort

        self.sess = ort_session(path, threads)
        n = threads or torch.get_num_threads()
        self.description = f"onnxruntime {ort.__version__}, CPUExecutionProvider, {n} intra-op threads"

    def run(self, x: np.ndarray) -> np.ndarray:
        return ort_raw(self.sess, x)


class OpenVINORuntime:
    """An OpenVINO IR (``.xml`` + ``.bin``) compiled for OpenVINO's CPU plugin.

    Args:
        path: the ``.xml`` (or the ``*_openvino_model`` folder holding one).
        precision: ``"f32"`` or ``"f16"``: the inference precision asked for (``INFERENCE_PRECISION_HINT``); the one
            the plugin applied is read back into ``inference_precision``.
        threads: ``INFERENCE_NUM_THREADS`` (default torch's count).

    Raises:
        ValueError: no ``.xml`` in the folder.
        RuntimeError: OpenVINO cannot read or compile the model (its own message).
    """

    label = "openvino"

    def __init__(self, path, precision: str = "f32", threads: int | None = None):
        import openvino as ov

        from attn_yolo.export.openvino_export import openvino_xml

        xml = openvino_xml(path)
        n = threads or torch.get_num_threads()
        core = ov.Core()
        cfg = {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": n}
        self.compiled = core.compile_model(core.read_model(str(xml)), "CPU", cfg)
        self.request = self.compiled.create_infer_request()
        p = self.compiled.get_property("INFERENCE_PRECISION_HINT")  # an ov.Type
        self.inference_precision = p.get_type_name() if hasattr(p, "get_type_name") else str(p)
        self.description = (f"OpenVINO {ov.get_version().split('-')[0]}, CPU plugin, inference precision "
                            f"{self.inference_precision} (asked {precision}), {n} threads")

    def run(self, x: np.ndarray) -> np.ndarray:
        out = self.request.infer({0: np.ascontiguousarray(x, dtype=np.float32)})
        return np.asarray(out[self.compiled.output(0)], dtype=np.float32)


class EngineRuntime:
    """A TensorRT ``.engine`` on CUDA ``device`` through Ultralytics' ``AutoBackend`` (fp16 input for an fp16 engine).

    Raises:
        RuntimeError: no CUDA device (``attn_yolo.export.tensorrt_export.require_cuda``).
    """

    label = "engine"

    def __init__(self, path, device: str = "cuda:0", half: bool = True):
        from ultralytics.nn.autobackend import AutoBackend

        from attn_yolo.export.tensorrt_export import require_cuda

        require_cuda()
        self.device = torch.device(device)
        self.backend = AutoBackend(str(path), device=self.device, fp16=half, verbose=False)
        trt = getattr(self.backend, "backend", None)
        self.description = (f"TensorRT ({type(trt).__name__ if trt is not None else 'AutoBackend'}) on "
                            f"{torch.cuda.get_device_name(self.device)}, fp16 input {bool(half)}")

    @torch.inference_mode()
    def run(self, x: np.ndarray) -> np.ndarray:
        y = self.backend(torch.from_numpy(x).to(self.device))
        y = y[0] if isinstance(y, (list, tuple)) else y
        return (y if isinstance(y, torch.Tensor) else torch.as_tensor(y)).float().cpu().numpy()


def open_runtime(fmt: str, path, precision: str = "fp32", threads: int | None = None):
    """The runtime of ``fmt`` (``onnx``, ``openvino``, ``engine``) for ``path``; ``precision``: the export's (an
    OpenVINO IR runs in f32 whatever its weights' precision)."""
    if fmt == "onnx":
        return OrtRuntime(path, threads)
    if fmt == "openvino":
        return OpenVINORuntime(path, "f32", threads)  # fp16 IR: fp16 weights, f32 arithmetic (module docstring)
    if fmt == "engine":
        return EngineRuntime(path, half=precision == "fp16")
    raise ValueError(f"format={fmt!r}: no runtime; allowed: onnx, openvino, engine")


# ------------------------------------------------------------------------------------------------------------- latency
def latency_ms(runtime, x: np.ndarray, repeats: int = 50, warmup: int = 5) -> float:
    """Median wall time (ms) of ``runtime.run(x)`` over ``repeats`` runs after ``warmup`` untimed ones.

    Raises:
        ValueError: ``repeats < 1``.
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r}; expected an int >= 1")
    sync = torch.cuda.synchronize if isinstance(runtime, EngineRuntime) else (lambda: None)
    for _ in range(warmup):
        runtime.run(x)
    times = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        runtime.run(x)
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def onnx_latency_ms(onnx_path, imgsz: int | tuple[int, int] = 640, repeats: int = 50, warmup: int = 5,
                    batch: int = 1, threads: int | None = None) -> float:
    """Median wall time (ms) of one onnxruntime CPU inference of ``onnx_path`` on a ``(batch, 3, h, w)`` input.

    The input is uniform noise in [0, 1] (fixed seed); ``warmup`` untimed runs first. ``threads``: intra-op threads
    (default torch's thread count, so it compares with PyTorch in the same process).

    Raises:
        ValueError: ``imgsz``/``batch`` differ from a static file's input shape, or ``repeats < 1``.
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r}; expected an int >= 1")
    h, w = (imgsz, imgsz) if isinstance(imgsz, int) else tuple(imgsz)
    rt = OrtRuntime(onnx_path, threads)
    inp = rt.sess.get_inputs()[0]
    fixed = [d if isinstance(d, int) else None for d in inp.shape]
    want = [batch, 3, h, w]
    if any(f is not None and f != v for f, v in zip(fixed, want)):
        raise ValueError(f"{onnx_path}: static input shape {inp.shape}, asked for {want}; export with dynamic=True")
    return latency_ms(rt, np.random.default_rng(0).random(want, dtype=np.float32), repeats, warmup)
