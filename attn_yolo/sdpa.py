"""Ultralytics' own attention layers on ``F.scaled_dot_product_attention``: same math, same weights, stock checkpoints.

    import attn_yolo
    from ultralytics import YOLO

    model = attn_yolo.fuse_attention(YOLO("yolo12n.yaml"))   # every Attention / AAttn in it, in place; returns model
    model.train(data=..., imgsz=640)                          # its training runs fused too (a callback)
    attn_yolo.unfuse_attention(model)                         # back to Ultralytics' explicit softmax(QKᵀ)V

Ultralytics 8.4.190 computes attention by hand in both of its attention layers (``ultralytics/nn/modules/block.py``):
``Attention`` (PSA, C2PSA in yolo11 and yolo26, C3k2 with ``attn=True`` in yolo26) and ``AAttn`` (the area attention
of A2C2f/ABlock in yolo12). Fused, each computes the same function on PyTorch's fused kernel:

- ``Attention``: ``softmax(q kᵀ · key_dim^-0.5) v + pe(v)``, q and k of width ``key_dim = head_dim · attn_ratio``
  (0.5), v of width ``head_dim``. The scale stays ``self.scale`` (``key_dim^-0.5``, passed as ``scale=``); q and k are
  zero-padded to v's width, which leaves every q·k unchanged, because the fused CPU and CUDA flash kernels need equal
  widths (SDPA falls back to its math kernel otherwise).
- ``AAttn``: areas are horizontal strips of the row-major token sequence, as in Ultralytics' ``reshape(B * area, N //
  area, ...)``; scale ``head_dim^-0.5``; ``pe`` (7×7 depthwise) on v.

q, k and v are laid out (batch·area, heads, tokens, width) with unit stride on the width: the flash kernels need it,
and the math kernel the fallback takes without it is slower and larger than Ultralytics' own path. What runs is
chosen per call by ``kernel_for``, from the device and shape: where no fused kernel is measured to win
(``CPU_MIN_TOKENS``, ``attn-yolo bench sections=ultralytics``), Ultralytics' own explicit code runs.

How it is kept out of checkpoints: the setting lives in this process (a weak map from module to on/off), never in the
module. The classes are Ultralytics' own; their ``forward`` is replaced once, at class level, by one that looks the
module up and calls Ultralytics' original unless it is fused, and their ``__deepcopy__`` carries the setting to the
copy (Ultralytics deep-copies for the EMA, the validator and the exporter). Pickling (``torch.save``, Ultralytics'
checkpoints, the DDP temp file) writes exactly what Ultralytics writes: a checkpoint loads in a process without
attn_yolo, also with ``ULTRALYTICS_SAFE_LOAD=1``, and holds the stock classes and an identical state_dict.
"""

from __future__ import annotations

import copy
import weakref

import torch
import torch.nn.functional as F

from attn_yolo import ultralytics_api as api
from attn_yolo.ultralytics_api.layers import qkv_layout, split_v

__all__ = ["CPU_MIN_TOKENS", "attention_layers", "fuse_attention", "is_fused", "kernel_for",
           "is_default", "register_default_callbacks", "sdpa_callback", "set_default", "unfuse_attention"]

CPU_MIN_TOKENS = {"equal": 196, "padded": 400}
"""On CPU, the fused (flash) kernel runs from this many tokens per attention sequence (per area for AAttn); below it,
Ultralytics' explicit path, which is as fast there. ``equal``: q, k and v of one width (AAttn; Attention with
``attn_ratio=1``); ``padded``: Attention with ``key_dim < head_dim`` (Ultralytics' ``attn_ratio=0.5``), whose q and k
are zero-padded, doubling the q·k work. Measured module by module, forward and training, 1 and 2 threads
(``attn-yolo bench sections=ultralytics`` prints the table; ``BENCHMARKS.md``)."""

_SETTING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module → True (fused) / False (stock, explicit)
_DEFAULT = {"enabled": False}  # modules without their own setting (``set_default``)
_STOCK: dict[type, object] = {}  # patched class → Ultralytics' original forward
_TRAIN_EVENT = "on_pretrain_routine_end"  # after the trainer built its model, DDP wrapper and EMA


def _classes() -> tuple[type, type]:
    return api.attention_classes()


# ---------------------------------------------------------------------------------------------------- fused forwards
def attention_sdpa(m, x: torch.Tensor, pad: bool = True) -> torch.Tensor:
    """Ultralytics ``Attention.forward`` on SDPA. x: (B, C, H, W) → (B, C, H, W).

    ``pad``: zero-pad q and k (or v) to one width, for the fused kernels; False in a traced graph (ONNX), where the
    op is exported as a whole and any width works.
    """
    B, C, H, W = x.shape
    N = H * W
    lay = qkv_layout(m)  # q, k of key_dim, v of head_dim per head
    kd, hd = lay.q, lay.v
    qkv = m.qkv(x)
    q, k, v = qkv.view(B, lay.heads, lay.per_head, N).transpose(-2, -1).split(lay[1:], dim=-1)  # (B, nh, N, ·)
    w = max(kd, hd) if pad else None
    if pad:  # unit stride on the width (F.pad writes a new tensor; a zero pad would keep the strides)
        q, k, v = (F.pad(t, (0, w - t.shape[-1])) if t.shape[-1] < w else t.contiguous() for t in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, scale=m.scale)[..., :hd]  # (B, nh, N, hd)
    x = o.transpose(-2, -1).reshape(B, C, H, W) + m.pe(split_v(m, qkv))
    return m.proj(x)


def aattn_sdpa(m, x: torch.Tensor, pad: bool = True) -> torch.Tensor:
    """Ultralytics ``AAttn.forward`` (area attention) on SDPA. x: (B, C, H, W) → (B, C, H, W). ``pad`` is unused
    (q, k and v share ``head_dim``)."""
    B, _, H, W = x.shape
    N = H * W
    a = m.area if m.area > 1 else 1
    lay = qkv_layout(m)  # q, k and v of head_dim per head
    n, nh, hd, C = N // a, lay.heads, lay.v, m.all_head_dim
    qkv = m.qkv(x)  # (B, 3C, H, W)
    t = qkv.view(B, nh, lay.per_head, a, n).permute(0, 3, 1, 4, 2).contiguous().view(B * a, nh, n, lay.per_head)
    q, k, v = t.split(lay[1:], dim=-1)  # (B·a, nh, n, hd), unit stride on hd; area i = tokens i·n ... (i+1)·n - 1
    o = F.scaled_dot_product_attention(q, k, v, scale=hd**-0.5)
    o = o.view(B, a, nh, n, hd).permute(0, 2, 4, 1, 3).reshape(B, C, H, W)
    return m.proj(o + m.pe(split_v(m, qkv)))


def _tokens(m, x: torch.Tensor) -> int | None:
    """Tokens per attention sequence (per area for AAttn), or None where the fused forward does not apply."""
    H, W = x.shape[-2:]
    if isinstance(m, _classes()[1]):
        a = m.area if m.area > 1 else 1
        return (H * W) // a if (H * W) % a == 0 else None
    return H * W if qkv_layout(m).q > 0 else None


def kernel_for(m, x: torch.Tensor) -> str:
    """Which path a fused module takes for input ``x``: ``"sdpa"`` or ``"explicit"`` (Ultralytics' own code).

    - traced or compiled (ONNX/TorchScript export, ``torch.compile``): ``sdpa``, the op as a whole, unpadded;
    - CUDA: ``sdpa``; PyTorch's dispatcher picks flash (fp16/bf16), memory-efficient (also fp32) or cuDNN
      (``scripts/gpu_check.py`` measures each against the explicit path);
    - CPU: ``sdpa`` (the CPU flash kernel) from ``CPU_MIN_TOKENS`` tokens per sequence, else ``explicit``, with or
      without autograd alike;
    - any other device (MPS, XPU, ...): ``explicit`` (not measured here).
    """
    n = _tokens(m, x)
    if n is None or getattr(m, "format", None) == "coreml":  # CoreML export: Ultralytics' own SDPA call
        return "explicit"
    if torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or torch.compiler.is_compiling():
        return "sdpa"
    if x.device.type == "cuda":
        return "sdpa"
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        padded = qkv_layout(m).q != qkv_layout(m).v  # Attention with attn_ratio < 1
        return "sdpa" if n >= CPU_MIN_TOKENS["padded" if padded else "equal"] else "explicit"
    return "explicit"


# ------------------------------------------------------------------------------------------- the class-level switch
def _install() -> None:
    """Replace ``forward`` and add ``__deepcopy__`` on Ultralytics' Attention and AAttn, once per process."""
    for cls, fused in zip(_classes(), (attention_sdpa, aattn_sdpa)):
        if cls in _STOCK:
            continue
        stock = cls.forward

        def forward(self, x, _stock=stock, _fused=fused):
            if not _SETTING.get(self, _DEFAULT["enabled"]) or kernel_for(self, x) != "sdpa":
                return _stock(self, x)
            traced = torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()
            return _fused(self, x, pad=not traced)

        forward.__doc__, forward.__wrapped__ = stock.__doc__, stock
        _STOCK[cls] = stock
        api.patch_class(cls, forward=forward, __deepcopy__=_deepcopy)


def _deepcopy(self, memo):
    """``copy.deepcopy`` as for any module (new instance, deep-copied ``__dict__``, ``__setstate__``), plus this
    module's fused/stock setting for the copy."""
    cls = type(self)
    new = cls.__new__(cls)
    memo[id(self)] = new
    state = self.__getstate__() if hasattr(self, "__getstate__") else self.__dict__
    new.__setstate__(copy.deepcopy(state, memo))
    if self in _SETTING:
        _SETTING[new] = _SETTING[self]
    return new


def attention_layers(model) -> list[tuple[str, torch.nn.Module]]:
    """``[(name, module)]`` of every Ultralytics ``Attention`` and ``AAttn`` in ``model`` (a ``YOLO``, an
    ``nn.Module``, an ``AutoBackend``, ...)."""
    if not isinstance(model, torch.nn.Module):  # Ultralytics' YOLO is an nn.Module holding the model as .model
        raise TypeError(f"fuse_attention: expected a YOLO model or a torch.nn.Module, got {type(model).__name__}")
    return [(n, m) for n, m in model.named_modules() if isinstance(m, _classes())]


def is_fused(module) -> bool:
    """Whether an Ultralytics ``Attention``/``AAttn`` runs on SDPA (its own setting, else the process default)."""
    return isinstance(module, _classes()) and bool(_SETTING.get(module, _DEFAULT["enabled"]))


def fuse_attention(model, enabled: bool = True):
    """Put every Ultralytics ``Attention`` and ``AAttn`` of ``model`` on SDPA (``enabled=False``: back to stock), in
    place. A second call is a no-op. Parameters, buffers and state_dict are untouched; checkpoints saved afterwards
    are Ultralytics' own (see the module docstring).

    For an Ultralytics ``YOLO``, its later ``train()`` runs fused as well: a callback (``on_pretrain_routine_end``)
    fuses the trainer's model and EMA, also in DDP workers, which receive the callbacks. ``YOLO.train()`` ends by
    reloading best.pt into the ``YOLO``: call ``fuse_attention`` again for what follows.

    Args:
        model: a ``YOLO`` or any ``torch.nn.Module`` (``DetectionModel``, a segment/pose/OBB model, ...).
        enabled: True to fuse, False to restore Ultralytics' explicit attention.

    Returns:
        The same ``model``.

    Raises:
        TypeError: ``model`` is neither a ``YOLO`` nor a ``torch.nn.Module``; ``enabled`` is not a bool.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"fuse_attention: enabled={enabled!r}; expected True or False")
    layers = attention_layers(model)
    if enabled:
        _install()
    for _, m in layers:
        _SETTING[m] = enabled
    if hasattr(model, "add_callback"):  # a YOLO: its later train() too
        if enabled and not api.has_callback(model, _TRAIN_EVENT, _fuse_trainer):
            api.add_callbacks(model, _TRAIN_EVENT, last=(_fuse_trainer,))
        elif not enabled:
            api.remove_callback(model, _TRAIN_EVENT, _fuse_trainer)
    return model


def unfuse_attention(model):
    """Restore Ultralytics' explicit attention in ``model``: ``fuse_attention(model, enabled=False)``."""
    return fuse_attention(model, enabled=False)


def set_default(enabled: bool) -> None:
    """Process-wide: every Ultralytics ``Attention``/``AAttn`` without a setting of its own (including models built or
    loaded later) runs fused (True) or stock (False, the start). ``attn-yolo train|val|predict ... sdpa=True`` sets it.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"set_default: enabled={enabled!r}; expected True or False")
    if enabled:
        _install()
    _DEFAULT["enabled"] = enabled


def is_default() -> bool:
    """The process default (``set_default``)."""
    return _DEFAULT["enabled"]


# ------------------------------------------------------------------------------------------------------ callbacks
def _fuse_trainer(trainer) -> None:
    """Ultralytics trainer callback (``on_pretrain_routine_end``): fuse the model being trained and its EMA."""
    fuse_attention(trainer.model)
    ema = getattr(trainer, "ema", None)
    if ema is not None and isinstance(getattr(ema, "ema", None), torch.nn.Module):
        fuse_attention(ema.ema)


def sdpa_callback(_obj=None) -> None:
    """Ultralytics callback that turns the process default on (``set_default(True)``) where it runs.

    The CLI registers it in Ultralytics' default callbacks for ``sdpa=True``: every trainer, validator, predictor and
    exporter of the process carries it, and Ultralytics' DDP launcher pickles the trainer's callbacks into its temp
    file, so each DDP worker runs it at ``on_pretrain_routine_start`` before it builds anything.
    """
    set_default(True)


SDPA_EVENTS = ("on_pretrain_routine_start", "on_val_start", "on_predict_start", "on_export_start")
"""Ultralytics callback events the CLI attaches ``sdpa_callback`` to."""


def register_default_callbacks(enabled: bool = True) -> None:
    """Add (or remove) ``sdpa_callback`` in Ultralytics' default callbacks (``ultralytics.utils.callbacks.base``), so
    that every model created afterwards in this process carries it."""
    for event in SDPA_EVENTS:
        if enabled:
            api.add_default_callback(event, sdpa_callback)
        else:
            api.remove_default_callback(event, sdpa_callback)
