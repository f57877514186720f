"""Training callback: measure every attention block's health each epoch, feed Ultralytics' loggers, stop on NaN/inf.

``HealthMonitor.attach(trainer)`` (or ``model.add_callback("on_pretrain_routine_start", attach)`` on a ``YOLO``)
registers, on that trainer:

- at ``on_train_start``: picks ``images`` validation images (seeded by the run's ``seed``; the same every epoch),
  letterboxes them square to ``imgsz``, and records epoch 0 (the model before any step);
- at ``on_fit_epoch_end`` (after each epoch's validation): measures the EMA model (the one Ultralytics validates and
  saves) with ``measure``, appends one row per block to ``<save_dir>/gates.csv``, and puts the values into
  ``trainer.metrics`` as ``health/<block>/<column>`` for the loggers that read it in the same event (TensorBoard,
  MLflow, ClearML, Comet, DVC, W&B); they are taken out again after the loggers ran, so ``results.csv`` and the
  checkpoints keep Ultralytics' own columns;
- at ``on_train_end``: prints the last epoch's health table with flags and writes ``gates.png``;
- during training, a guard: forward hooks on every block of the training model check each gate's input (the logits;
  a sigmoid of finite logits is finite) and the block's output (for MHSA, whose logits ``QKᵀ`` stay inside the fused
  kernel, the output only) for NaN/inf: one ``isfinite().all()`` per tensor, read once per batch; the first
  non-finite one raises ``NonFiniteAttentionError`` naming the epoch, batch, layer and block.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from pathlib import Path

import numpy as np
import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.capture import attention_blocks, block_gates, has_attention_weights
from attn_yolo.health.flags import flags
from attn_yolo.health.gatescsv import CSV_NAME, read_csv, write_csv
from attn_yolo.health.measure import block_name, measure
from attn_yolo.health.report import console_table, plot_gates

PNG_NAME = "gates.png"
LOGGED = ("gate_mean", "gate_std", "saturated", "entropy", "peak_share", "gamma", "knockout")
PREFIX = "health/"
DEFAULT_IMAGES = 8


class NonFiniteAttentionError(FloatingPointError):
    """A NaN or inf in an attention block's gate logits or output during training."""


def load_images(files: list[str], imgsz: int, device, dtype=torch.float32) -> torch.Tensor:
    """Images as one batch ``(B, 3, imgsz, imgsz)`` in ``[0, 1]``, RGB, each letterboxed square to ``imgsz`` (grey
    padding 114, as Ultralytics' LetterBox)."""
    import cv2
    from ultralytics.data.augment import LetterBox

    box = LetterBox((imgsz, imgsz), auto=False)
    ims = []
    for f in files:
        im = cv2.imread(str(f))
        if im is None:
            raise FileNotFoundError(f"attention health: cannot read validation image {f}")
        ims.append(box(image=im)[..., ::-1].transpose(2, 0, 1))
    return torch.from_numpy(np.ascontiguousarray(np.stack(ims))).to(device, dtype) / 255


class HealthMonitor:
    """Per-epoch attention-block health of one training run (see the module docstring).

    Args:
        images (int): validation images measured every epoch (fewer if the split has fewer).
        knockout (bool): measure each block's knock-out effect (one forward pass of the images per block).
        guard (bool): stop training at the first NaN/inf in a block's gate logits or output.
        seed (int | None): seed of the image choice; None: the run's ``seed`` argument.

    Attributes:
        rows (list[dict]): every row written to ``gates.csv`` so far.
        files (list[str]): the chosen images; ``images_t``: them as the batch measured.
        time_s (float): seconds spent measuring (all epochs); ``guard_s``: in the guard's hooks.
    """

    def __init__(self, images: int = DEFAULT_IMAGES, knockout: bool = True, guard: bool = True,
                 seed: int | None = None):
        self.n_images, self.knockout, self.guard, self.seed = int(images), knockout, guard, seed
        self.rows: list[dict] = []
        self.files: list[str] = []
        self.images_t: torch.Tensor | None = None
        self.time_s = self.guard_s = 0.0
        self.active = False
        self._pending = False
        self._handles: list = []
        self._checks: list = []
        self._epoch = self._batch = 0
        self.csv_path: Path | None = None

    # ------------------------------------------------------------------------------------------------ registration
    def attach(self, trainer) -> HealthMonitor:
        """Register this monitor's callbacks on an Ultralytics trainer (new lists: the ``YOLO``'s own stay as they
        are). The metrics callback goes first in ``on_fit_epoch_end``, before the loggers; its cleanup goes last."""
        for event, fn in (("on_train_start", self.on_train_start), ("on_train_epoch_start", self.on_epoch_start),
                          ("on_train_batch_start", self.on_batch_start), ("on_train_batch_end", self.on_batch_end),
                          ("on_train_epoch_end", self.on_epoch_end), ("on_train_end", self.on_train_end),
                          ("teardown", self.teardown)):  # fmt: skip
            api.add_callbacks(trainer, event, last=(fn,))
        api.add_callbacks(trainer, "on_fit_epoch_end", first=(self.on_fit_epoch_end,), last=(self.after_loggers,))
        trainer.attn_health = self
        return self

    # ---------------------------------------------------------------------------------------------------- events
    def on_train_start(self, trainer) -> None:
        from ultralytics.utils import LOGGER, RANK

        model = self._model(trainer)
        if RANK not in {-1, 0} or model is None or not attention_blocks(model):
            LOGGER.info("attention health: no attention blocks in the model, nothing to measure")
            return
        self.active = True
        self.csv_path = Path(trainer.save_dir) / CSV_NAME
        self.files = self._choose_files(trainer)
        imgsz = trainer.args.imgsz if isinstance(trainer.args.imgsz, int) else max(trainer.args.imgsz)
        p = next(model.parameters())
        self.images_t = load_images(self.files, imgsz, p.device)
        start = int(getattr(trainer, "start_epoch", 0) or 0)
        if start and self.csv_path.exists():  # resumed: keep the rows of the epochs already done
            self.rows = [r for r in read_csv(self.csv_path) if r["epoch"] < start]
        if self.guard:
            self._install_guard(trainer)
        self._record(trainer, start)
        LOGGER.info(f"attention health: {len(attention_blocks(model))} blocks, {len(self.files)} validation images "
                    f"each epoch → {self.csv_path}")

    def on_epoch_start(self, trainer) -> None:
        self._epoch, self._batch = trainer.epoch, 0

    def on_batch_start(self, trainer) -> None:
        self._checks.clear()

    def on_batch_end(self, trainer) -> None:
        if self._checks:
            t0 = time.perf_counter()
            ok = bool(torch.stack([c for _, c in self._checks]).all())
            self.guard_s += time.perf_counter() - t0
            if not ok:
                where = next(label for label, c in self._checks if not bool(c))
                self.remove_guard()
                raise NonFiniteAttentionError(f"non-finite attention during training: epoch {self._epoch + 1}, batch "
                                              f"{self._batch + 1}: {where}")
        self._checks.clear()
        self._batch += 1

    def on_epoch_end(self, trainer) -> None:
        self._pending = True  # on_fit_epoch_end follows; the final validation's one (no epoch) does not set this

    def on_fit_epoch_end(self, trainer) -> None:
        if not (self.active and self._pending):
            return
        self._pending = False
        rows = self._record(trainer, trainer.epoch + 1)
        if (metrics := api.epoch_metrics(trainer)) is not None:
            for r in rows:
                for k in LOGGED:
                    if isinstance(r[k], float) and math.isfinite(r[k]):
                        metrics[f"{PREFIX}{r['name']}/{k}"] = r[k]

    def after_loggers(self, trainer) -> None:
        if (metrics := api.epoch_metrics(trainer)) is not None:
            for k in [k for k in metrics if str(k).startswith(PREFIX)]:
                metrics.pop(k)

    def on_train_end(self, trainer) -> None:
        from ultralytics.utils import LOGGER

        self.remove_guard()
        if not self.active or not self.rows:
            return
        png = Path(trainer.save_dir) / PNG_NAME
        with contextlib.suppress(Exception):  # a plot failure must not fail a finished training
            plot_gates(self.rows, png)
        LOGGER.info(console_table(self.rows, f"{len(self.files)} validation images; {self.csv_path.name}, {png.name} "
                                  f"in {trainer.save_dir}; measuring took {self.time_s:.1f} s"))

    def teardown(self, trainer) -> None:
        self.remove_guard()

    # ---------------------------------------------------------------------------------------------------- helpers
    @staticmethod
    def _model(trainer):
        ema = getattr(trainer, "ema", None)
        has_ema = ema is not None and getattr(ema, "ema", None) is not None
        model = ema.ema if has_ema else getattr(trainer, "model", None)
        from ultralytics.utils.torch_utils import unwrap_model

        return None if model is None or isinstance(model, str) else unwrap_model(model)

    def _choose_files(self, trainer) -> list[str]:
        files = api.validation_images(trainer)
        if not files:
            raise FileNotFoundError("attention health: the trainer has no validation images to measure on")
        seed = self.seed if self.seed is not None else int(getattr(trainer.args, "seed", 0) or 0)
        return sorted(random.Random(seed).sample(files, min(self.n_images, len(files))))

    def _record(self, trainer, epoch: int) -> list[dict]:
        t0 = time.perf_counter()
        health = measure(self._model(trainer), self.images_t, knockout=self.knockout)
        rows = []
        for name, h in health.items():
            row = {"epoch": epoch, "name": name, **h}
            row["flags"] = flags(row)
            rows.append(row)
        self.rows += rows
        self._write()
        self.time_s += time.perf_counter() - t0
        return rows

    def _write(self) -> None:
        write_csv(self.rows, self.csv_path)

    def _install_guard(self, trainer) -> None:
        from ultralytics.utils.torch_utils import unwrap_model

        for key, block in attention_blocks(unwrap_model(trainer.model)).items():
            label = f"layer {key[0]}{'.' + key[1] if key[1] else ''} {type(block).__name__} ({block_name(key, block)})"
            for path, gate in block_gates(block).items():  # finite logits give a finite gate: its input suffices
                self._handles.append(gate.register_forward_hook(self._check(f"{label}: NaN/inf in the logits of gate "
                                                                            f"'{path}' (its input)", 0)))
            what = "attention output" if has_attention_weights(block) else "output"
            self._handles.append(block.register_forward_hook(self._check(f"{label}: NaN/inf in the block's {what}")))

    def _check(self, label: str, arg: int | None = None):
        def hook(module, args, out):
            if module.training:
                t0 = time.perf_counter()
                t = out if arg is None else args[arg]
                if torch.is_tensor(t):
                    self._checks.append((label, torch.isfinite(t.detach()).all()))
                self.guard_s += time.perf_counter() - t0

        return hook

    def remove_guard(self) -> None:
        """Remove the guard's hooks (and only those)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()


def attach(trainer, **kwargs) -> HealthMonitor:
    """``on_pretrain_routine_start`` callback: a new ``HealthMonitor(**kwargs)`` attached to ``trainer``.

    Example:
        >>> model = YOLO("models/yolo11n-cbam.yaml")
        >>> model.add_callback("on_pretrain_routine_start", attach)
        >>> model.train(data=..., epochs=10)  # writes gates.csv, gates.png beside results.csv
    """
    return HealthMonitor(**kwargs).attach(trainer)


@contextlib.contextmanager
def default_on():
    """Within the block, every Ultralytics trainer created gets a ``HealthMonitor`` (``attn-yolo train``).

    Adds ``attach`` to Ultralytics' default ``on_pretrain_routine_start`` callbacks
    (``ultralytics.utils.callbacks.base.default_callbacks``, which every ``YOLO`` copies when created); removed on
    exit."""
    api.add_default_callback("on_pretrain_routine_start", attach, unique=False)  # nested blocks: one each
    try:
        yield
    finally:
        api.remove_default_callback("on_pretrain_routine_start", attach)
