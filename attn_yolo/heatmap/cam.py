"""Class-activation maps (EigenCAM, Grad-CAM via ``pytorch_grad_cam``) over the layers that feed ``Detect``.

``cam=eigencam`` or ``cam=gradcam`` of the heatmap tool (needs ``grad-cam``: ``pip install 'attn-yolo[cam]'``) adds
such a map per image, also for models without attention blocks. The map is an ``AttentionMap`` of kind ``cam``.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
from torch import nn

from attn_yolo import ultralytics_api as api
from attn_yolo.heatmap.letterbox import letterbox
from attn_yolo.heatmap.maps import AttentionMap
from attn_yolo.heatmap.model import HeatmapError, as_model

CAM_METHODS = ("eigencam", "gradcam")


def class_activation_map(model, image: np.ndarray, method: str = "eigencam", *, imgsz: int = 640, conf: float = 0.25):
    """EigenCAM or Grad-CAM (``pytorch_grad_cam``) over the layers feeding ``Detect``, as an ``AttentionMap``.

    The detector output is reduced to one tensor ``(B, 4 + nc, anchors)``; Grad-CAM's scalar target is the sum of the
    best class score of every anchor scoring ``>= conf`` (the single best anchor if none does). Gradients flow from a
    ``requires_grad`` input, so a loaded checkpoint with frozen parameters works; the parameters are not changed.

    Raises:
        HeatmapError: ``grad-cam`` is not installed, or an unknown ``method``.
    """
    try:
        from pytorch_grad_cam import EigenCAM, GradCAM
    except ImportError:
        raise HeatmapError("cam= needs the grad-cam library: pip install 'attn-yolo[cam]'") from None
    if method not in CAM_METHODS:
        raise HeatmapError(f"cam={method!r}: expected one of {', '.join(CAM_METHODS)}")
    net = as_model(model)
    head = net.model[-1]
    targets_layers = [net.model[j] for j in (head.f if isinstance(head.f, list) else [head.f])]
    x = letterbox(net, image, imgsz)

    class Scores(nn.Module):  # detector → one tensor (B, 4 + nc, anchors), as grad-cam expects
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, t):
            y = self.m(t)
            return y[0] if isinstance(y, tuple | list) else y

    def target(out):  # (4 + nc, anchors) → scalar
        s = out[4:].amax(0)
        keep = s >= conf
        return s[keep].sum() if keep.any() else s.max()

    was_training, params = net.training, list(net.parameters())
    frozen = [q.requires_grad for q in params]
    net.eval().requires_grad_(False)  # gradients reach the activations through the input; no .grad on the weights
    api.reset_anchor_cache(head)  # rebuilt inside the graph (a cache made under inference_mode breaks it)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            cls = EigenCAM if method == "eigencam" else GradCAM
            with cls(model=Scores(net), target_layers=targets_layers) as c:
                grey = c(input_tensor=x.clone().requires_grad_(True), targets=[target])[0]
    finally:
        net.train(was_training)
        for q, r in zip(params, frozen):
            q.requires_grad_(r)
    h, w = x.shape[2:]
    return AttentionMap(
        -1,
        "EigenCAM" if method == "eigencam" else "GradCAM",
        "cam",
        cv2.resize(grey.astype(np.float32), (w // 8, h // 8), interpolation=cv2.INTER_AREA),
        8,
    )
