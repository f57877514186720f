"""GFLOPs as Ultralytics counts them, and the counters they are checked against.

The seam's part: thop, as Ultralytics' ``get_flops`` calls it.

Ultralytics' ``ultralytics.utils.torch_utils.get_flops`` (what ``model.info()``, the ablation's records and the bench
report) runs ``thop.profile`` with ``stride=``: ultralytics-thop 2.2 then measures proxy images one stride tall and
1..4 strides wide and extrapolates to the target size by Newton differences (exactly, for costs polynomial in the
number of stride cells, quadratic where it sees attention). MHSA's cost is such a polynomial (linear layers in N
tokens, attention in N²), so the extrapolation is exact; BiLevelRoutingAttention's is not (regions of
``ceil(H / n_win)`` tokens): on the 1-row proxies every region is one token, its attention grows as k·min(k, topk),
and the quadratic fit overstates the block's cost at 640 about twofold (yolo11n at the SPPF site: 0.46 against 0.23
GFLOPs; the whole model 7.13 against 6.91). ``full_size_gflops`` measures with the same rules on one image of the
target size, exact for every block. ``flop_counter_gflops`` is PyTorch's ``FlopCounterMode`` with SDPA on its math
backend: on CPU the fused kernel (``_scaled_dot_product_flash_attention_for_cpu``) has no FLOP formula there, so
without it the attention products are not counted at all.
"""

from __future__ import annotations

import copy

import torch


def _image(model: torch.nn.Module, imgsz) -> torch.Tensor:
    p = next(model.parameters())
    h, w = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
    return torch.zeros((1, p.shape[1] if p.dim() == 4 else 3, h, w), device=p.device, dtype=p.dtype)


def full_size_gflops(model: torch.nn.Module, imgsz: int | tuple[int, int] = 640) -> float:
    """GFLOPs of ``model`` by thop's rules (as Ultralytics' ``get_flops``: 2 FLOPs per multiply-accumulate), measured
    on one ``imgsz`` image rather than extrapolated from stride-sized proxies. Shapes: ``imgsz`` int or ``(h, w)``,
    pixels. Returns 0.0 without ultralytics-thop, as ``get_flops`` does.

    Raises:
        RuntimeError: what the forward pass raises at that size.
    """
    try:
        import thop
    except ImportError:
        return 0.0
    m = copy.deepcopy(model).eval()
    return thop.profile(m, inputs=[_image(m, imgsz)], verbose=False)[0] / 1e9 * 2


def flop_counter_gflops(model: torch.nn.Module, imgsz: int | tuple[int, int] = 640) -> float:
    """GFLOPs of one forward pass of ``model`` on an ``imgsz`` image by ``torch.utils.flop_counter.FlopCounterMode``
    (matrix products and convolutions, 2 FLOPs per multiply-accumulate), SDPA run on its math backend so that its
    products are counted on every device."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    m = copy.deepcopy(model).eval()
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        m(_image(m, imgsz))
    return counter.get_total_flops() / 1e9


def versions() -> dict[str, str | None]:
    """The versions that make a run's numbers what they are: ``{"ultralytics_version", "torch_version",
    "thop_version"}`` (``thop_version``: the ultralytics-thop distribution ``get_flops`` counts with; None where it is
    not installed, and ``get_flops`` reports 0.0)."""
    from importlib import metadata

    import ultralytics

    try:
        thop = metadata.version("ultralytics-thop")
    except metadata.PackageNotFoundError:
        thop = None
    return {"ultralytics_version": ultralytics.__version__, "torch_version": torch.__version__, "thop_version": thop}
