"""The seam to Ultralytics' INT8 export: extra nodes kept float in its ONNX Runtime and NNCF quantization calls.

Ultralytics 8.4.190 quantizes ``format=onnx quantize=8`` in ``ultralytics.utils.export.onnx.onnx_int8_quantize``,
which imports ``onnxruntime.quantization.quantize_static`` when called and passes ``nodes_to_exclude`` (every node
but Conv, Gemm and MatMul), and ``format=openvino quantize=8`` in ``ultralytics.utils.export.openvino.torch2openvino``,
which calls ``nncf.quantize(..., ignored_scope=)`` (every Sigmoid and the Detect head's DFL). ``extra_float`` wraps
both library functions for the duration of an export so that the nodes a caller names are excluded too, on top of
Ultralytics' own rule (the contract: ``INT8_CALLS``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

INT8_CALLS = {
    "ultralytics.utils.export.onnx:onnx_int8_quantize": ("from onnxruntime.quantization import quantize_static",
                                                          "nodes_to_exclude="),
    "ultralytics.utils.export.openvino:torch2openvino": ("nncf.quantize(", "ignored_scope="),
    "ultralytics.engine.exporter:Exporter": ("def get_int8_calibration_dataloader(self, prefix",
                                             "self.get_int8_calibration_dataloader(prefix)"),
}
"""Ultralytics function (or class) → text its source must hold: it looks the quantizer up at call time and passes the
exclusions by that keyword; the exporter builds its calibration batches in one method (``calibration_progress``)
(checked by the contract)."""


@contextlib.contextmanager
def extra_float(onnx_nodes: Callable[[str], list[str]] | None = None,
                openvino_nodes: Callable[[object], list[str]] | None = None) -> Iterator[dict]:
    """Within the block, Ultralytics' INT8 exports also keep the nodes these callbacks name in float.

    Args:
        onnx_nodes: ``fp32 .onnx path -> node names`` added to ``quantize_static``'s ``nodes_to_exclude``.
        openvino_nodes: ``ov.Model -> op friendly names`` added to ``nncf.quantize``'s ``ignored_scope.names``.

    Yields:
        dict: filled during the export with ``{"onnx": [...], "openvino": [...]}``: the nodes actually added.
    """
    import nncf
    import onnxruntime.quantization as ortq

    added: dict = {}
    quantize_static, quantize = ortq.quantize_static, nncf.quantize

    def static(model_input, model_output, reader, *a, nodes_to_exclude=None, **kw):
        extra = [n for n in (onnx_nodes(str(model_input)) if onnx_nodes else []) if n not in (nodes_to_exclude or [])]
        added["onnx"] = extra
        return quantize_static(model_input, model_output, reader, *a,
                               nodes_to_exclude=list(nodes_to_exclude or []) + extra, **kw)

    def nncf_quantize(model, *a, ignored_scope=None, **kw):
        old = ignored_scope or nncf.IgnoredScope()
        extra = [n for n in (openvino_nodes(model) if openvino_nodes else []) if n not in old.names]
        added["openvino"] = extra
        scope = nncf.IgnoredScope(names=[*old.names, *extra], patterns=old.patterns, types=old.types,
                                  subgraphs=old.subgraphs, validate=old.validate)
        return quantize(model, *a, ignored_scope=scope, **kw)

    ortq.quantize_static, nncf.quantize = static, nncf_quantize
    try:
        yield added
    finally:
        ortq.quantize_static, nncf.quantize = quantize_static, quantize


class _Shown:
    """Ultralytics' calibration dataloader, its batches iterated through ``wrap(loader, n_batches)``; every other
    attribute the loader's."""

    def __init__(self, loader, wrap):
        self.loader, self.wrap = loader, wrap

    def __iter__(self):
        return iter(self.wrap(self.loader, len(self.loader)))

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name):
        return getattr(self.loader, name)


@contextlib.contextmanager
def calibration_progress(wrap: Callable[[Iterable, int], Iterable]) -> Iterator[None]:
    """Within the block, the batches Ultralytics' INT8 export calibrates on (ONNX Runtime's reader, NNCF's dataset:
    ``Exporter.get_int8_calibration_dataloader``) pass through ``wrap(loader, n_batches)``, e.g. a progress bar."""
    from ultralytics.engine.exporter import Exporter

    get = Exporter.get_int8_calibration_dataloader

    def shown(self, prefix=""):
        return _Shown(get(self, prefix), wrap)

    Exporter.get_int8_calibration_dataloader = shown
    try:
        yield
    finally:
        Exporter.get_int8_calibration_dataloader = get
