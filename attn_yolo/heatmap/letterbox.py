"""The model input as Ultralytics' predictor makes it for ``.pt`` models: letterbox, and its gain and padding."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def letterbox_gain_pad(shape0, shape1) -> tuple[float, float, float, float]:
    """``(gain_x, gain_y, pad_x, pad_y)`` of a centred Ultralytics letterbox from ``shape0`` to ``shape1`` (H, W)."""
    gain = min(shape1[0] / shape0[0], shape1[1] / shape0[1])
    new_h, new_w = (max(round(s * gain), 1) for s in shape0[:2])
    pad_x, pad_y = round((shape1[1] - new_w) / 2 - 0.1), round((shape1[0] - new_h) / 2 - 0.1)
    return new_w / shape0[1], new_h / shape0[0], pad_x, pad_y


def letterbox(model: nn.Module, image: np.ndarray, imgsz: int) -> torch.Tensor:
    """Model input ``(1, 3, H, W)`` of a BGR image as Ultralytics' predictor makes it for ``.pt`` models: minimal
    rectangle ``LetterBox(imgsz, auto=True, stride)`` (sides multiples of the model stride), RGB, ``/255``, on the
    model's device and dtype. ``imgsz`` is rounded up to a multiple of the stride, with Ultralytics' warning."""
    from ultralytics.data.augment import LetterBox
    from ultralytics.utils.checks import check_imgsz

    p = next(model.parameters())
    stride = int(max(getattr(model, "stride", torch.tensor([32.0])).max(), 32))
    im = LetterBox(check_imgsz(imgsz, stride=stride), auto=True, stride=stride)(image=image)  # rounds up as predict
    return torch.from_numpy(np.ascontiguousarray(im[..., ::-1].transpose(2, 0, 1)))[None].to(p.device, p.dtype) / 255
