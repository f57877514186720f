"""Contacts with Ultralytics' trainer and validator: per-image validation records, a trainer's callback lists.

- ``MatchingValidator``: Ultralytics' ``DetectionValidator`` with a hook after each image's matching;
- ``PerImageValidator``: Ultralytics' ``DetectionValidator`` that keeps, for a final or standalone validation, each
  image's matching as plain numpy arrays (it reads the per-image batch dict of ``_prepare_batch`` and
  ``scale_preds``; ``CONTRACT`` checks the keys);
- ``PerImageTrainer``: Ultralytics' ``DetectionTrainer`` whose validator is ``validator_class`` (built as
  ``get_validator`` builds its own, from ``test_loader`` and the private ``_callbacks=``);

Imported on first use (``import attn_yolo`` does not import Ultralytics' trainers).
"""

from __future__ import annotations

from copy import copy

from ultralytics.models.yolo.detect import DetectionTrainer, DetectionValidator
from ultralytics.utils import ops

IMAGE_KEYS = ("im_file", "cls", "bboxes", "imgsz", "ori_shape", "ratio_pad")
"""Keys of the per-image batch dict (``DetectionValidator._prepare_batch``) that ``image_entry`` reads."""


class MatchingValidator(DetectionValidator):
    """Ultralytics' ``DetectionValidator`` that calls ``on_matched(preds, batch, out)`` after it matched one image's
    predictions to its boxes (the private ``_process_batch``; ``out["tp"]``: (N, 10) bool, one column per IoU
    0.50:0.95)."""

    def on_matched(self, preds: dict, batch: dict, out: dict) -> None:
        """Override: called once per image with its predictions, its batch entry and the matching."""

    def _process_batch(self, preds: dict, batch: dict) -> dict:
        out = super()._process_batch(preds, batch)
        self.on_matched(preds, batch, out)
        return out


def image_entry(validator, preds: dict, batch: dict, out: dict) -> dict:
    """One validated image as numpy arrays: ``file``; ``tp`` (N, 10) bool, Ultralytics' TP flags at IoU 0.50:0.95;
    ``conf`` (N,), ``cls`` (N,), ``box`` (N, 4) xyxy px of the original image; ``gt_cls`` (M,), ``gt_box`` (M, 4)."""
    gt = batch["bboxes"]
    if len(batch["cls"]):
        gt = ops.scale_boxes(batch["imgsz"], gt.clone(), batch["ori_shape"], ratio_pad=batch["ratio_pad"])
    return {
        "file": str(batch["im_file"]),
        "tp": out["tp"].astype(bool),
        "conf": preds["conf"].float().cpu().numpy(),
        "cls": preds["cls"].cpu().numpy(),
        "box": validator.scale_preds(preds, batch)["bboxes"].float().cpu().numpy().reshape(-1, 4),
        "gt_cls": batch["cls"].cpu().numpy().reshape(-1),
        "gt_box": gt.float().cpu().numpy().reshape(-1, 4),
    }


class PerImageValidator(MatchingValidator):
    """Ultralytics' ``DetectionValidator`` that keeps its per-image matching results in ``self.per_image`` (a list of
    ``image_entry`` dicts) for a final or standalone validation; None during training's per-epoch validations."""

    def init_metrics(self, model) -> None:
        super().init_metrics(model)
        self.per_image = None if self.training else []

    def on_matched(self, preds: dict, batch: dict, out: dict) -> None:
        if getattr(self, "per_image", None) is not None:
            self.per_image.append(image_entry(self, preds, batch, out))


class PerImageTrainer(DetectionTrainer):
    """Ultralytics' ``DetectionTrainer`` whose validator is a ``validator_class`` (a ``PerImageValidator``): after
    ``train()``, ``trainer.validator.per_image`` holds the final validation of best.pt image by image."""

    validator_class: type = PerImageValidator

    def get_validator(self):
        return self.validator_class(self.test_loader, save_dir=self.save_dir, args=copy(self.args),
                                    _callbacks=self.callbacks)
