"""What every block shares: the inferred-width marker ``C1``, input-width resolution and hyperparameter checks.

A block built from a YAML row gets a marker instead of its input width (``C1``, or the row marker that
``attn_yolo.registry`` makes, ``attn_yolo.conventions.RowArgs``, which carries the row's args as written). ``resolve``
asks such a marker, by its ``resolve(name, values)`` method, for the row's input width, the context for error
messages (row, scale, module as written) and the hyperparameters as the row's author meant them. The blocks
therefore depend on nothing above this package; built directly (``SE(256)``), a block takes its width as the first
argument like any PyTorch layer.
"""

from __future__ import annotations

import math

import torch


class _InferredC1:
    """Marker for "input width taken from the YAML row"; prints as ``c1`` in Ultralytics' layer table."""

    def __repr__(self) -> str:
        return "c1"


C1 = _InferredC1()


class AttnBuildError(ValueError):
    """A block got a hyperparameter outside its allowed range; the message names the row, module, value and range."""


def resolve(c1, name: str, *values) -> tuple[int, str, tuple]:
    """Return ``(input width, context, hyperparameters)`` for a block being built.

    ``c1`` is the width as given, or a row marker: then the width, the context (``"row 5 (scale n) SE"``) and the
    hyperparameters come from the YAML row (the marker's ``resolve(name, values)``), and ``values`` (the block's
    hyperparameters in signature order, at their defaults) are replaced. Otherwise the context is ``name`` and
    ``values`` are returned unchanged.

    Raises:
        AttnBuildError: ``c1`` is ``C1`` outside a YAML build, or not a positive int.
    """
    where = name
    if isinstance(c1, _InferredC1) and callable(getattr(c1, "resolve", None)):
        c1, where, values = c1.resolve(name, values)
    if not is_int(c1) or c1 < 1:
        raise AttnBuildError(f"{where}: input channels c1={c1!r}; expected a positive int (or build from a YAML row)")
    return c1, where, values


def in_place_ok() -> bool:
    """True where a block may write into a buffer of its own: no autograd (which may need the overwritten values),
    no tracing (TorchScript ONNX export maps ``out=`` variants badly) and no ``torch.compile``."""
    return not (torch.is_grad_enabled() or torch.jit.is_tracing() or torch.compiler.is_compiling())


def hooked(*modules: torch.nn.Module) -> bool:
    """True when a forward hook watches any of ``modules`` (a FLOP counter such as thop, which Ultralytics'
    ``get_flops`` and ``model.info()`` use, or a user's hook): a block that otherwise computes their work
    functionally then calls them, so the hooks see the calls they expect (same values)."""
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def fold_bn(w: torch.Tensor, bn: torch.nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """A bias-free conv of weight ``w`` ``(C_out, ...)`` followed by an eval-mode BatchNorm, as one conv: weight
    ``w · s`` and bias ``β − μ · s`` with ``s = γ / √(σ² + ε)`` (per output channel)."""
    s = bn.weight * torch.rsqrt(bn.running_var + bn.eps)
    return w * s.view(-1, *([1] * (w.dim() - 1))), bn.bias - bn.running_mean * s


def gate_product(gate: torch.nn.Module, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``x ⊙ gate(a)``, the gate applied to a full-size map ``a`` that the block made itself (``a`` is
    overwritten when no autograd, tracing or hook on ``gate`` can see it: ``in_place_ok``, ``hooked``).

    In place, a sigmoid or identity ``gate`` and the product run in ``a``'s buffer: no new full-size tensors,
    which on CPU matters beyond the two passes saved (a fresh multi-MiB buffer is often fresh pages from the OS,
    zeroed on first touch). Otherwise ``x * gate(a)``, the same values. Shapes: ``a`` and ``x`` ``(B, C, H, W)``.
    """
    if a.shape != x.shape or not in_place_ok() or hooked(gate):
        return x * gate(a)
    if isinstance(gate, torch.nn.Sigmoid):
        a = a.sigmoid_()
    elif not isinstance(gate, torch.nn.Identity):
        a = gate(a)
    return a.mul_(x)


def conv1x1(x: torch.Tensor, w: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """1×1 conv without bias, ``w`` ``(C_out, C_in)``, as one GEMM whose output has the layout asked for, whatever
    ``x``'s (NCHW or channels-last; the GEMM reads either operand transposed without a copy). So a block's fast path
    changes layout inside a conv it has anyway instead of a separate transposing copy. Shapes:
    ``(B, C_in, H, W) -> (B, C_out, H, W)``."""
    b, _, h, w_ = x.shape
    if channels_last:  # (B, HW, C_in) @ (C_in, C_out): rows are pixels
        return torch.bmm(x.flatten(2).transpose(1, 2), w.t().expand(b, -1, -1)).view(b, h, w_, -1).permute(0, 3, 1, 2)
    return torch.bmm(w.expand(b, -1, -1), x.flatten(2)).view(b, -1, h, w_)  # (C_out, C_in) @ (C_in, HW)


def is_int(x) -> bool:
    """True for an ``int`` that is not a ``bool`` (YAML ``true`` is no channel count)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x) -> bool:
    """True for a finite ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check(ok: bool, where: str, what: str, value, allowed: str) -> None:
    """Raise ``AttnBuildError('<where>: <what>=<value> is invalid; allowed: <allowed>')`` unless ``ok``."""
    if not ok:
        raise AttnBuildError(f"{where}: {what}={value!r} is invalid; allowed: {allowed}")


def check_r(r, where: str, c1: int | None = None, name: str = "r", paper: int = 16) -> None:
    """Check a channel reduction ratio (SE, CBAM, CoordAtt ``r``; GAM ``rate``): an int >= 1; with ``c1``, at most
    ``c1``, so the hidden width ``C // r >= 1`` (blocks whose hidden width has a floor, like CoordAtt's, pass none)."""
    if c1 is None:
        check(is_int(r) and r >= 1, where, name, r, f"an int >= 1 (paper: {paper})")
    else:
        allowed = f"an int in 1..{c1} (hidden width C // {name} >= 1 at C={c1}; paper: {paper})"
        check(is_int(r) and 1 <= r <= c1, where, name, r, allowed)


def check_kernel(k, where: str) -> None:
    """Check CBAM's spatial kernel ``k`` (SAM, CBAM): the int 3 or 7."""
    check(is_int(k) and k in (3, 7), where, "k", k, "the int 3 or 7 (spatial kernel, paper: 7)")


def check_odd_k(k, where: str, paper: int = 7) -> None:
    """Check a convolution kernel size ``k`` that keeps the map size with padding ``k // 2``: a positive odd int."""
    check(is_int(k) and k >= 1 and k % 2 == 1, where, "k", k, f"a positive odd int (paper: {paper})")


def check_init_values(init_values, where: str) -> None:
    """Check a residual gate init (every block): None, or a finite number in ``[0, 1]``."""
    ok = init_values is None or (is_number(init_values) and 0 <= init_values <= 1)
    check(ok, where, "init_values", init_values, "None (no gate) or a number in [0, 1] (0.0: identity at init)")


def group_count(groups, allowed: list[int], paper: int, where: str, name: str) -> int:
    """A block's group count: ``groups`` if given, which must be in ``allowed``; if None, the largest allowed value
    ``<= paper`` (the paper's count where it fits ``C``, else the nearest count below it that does).

    Raises:
        AttnBuildError: ``groups`` given and not in ``allowed``; the message lists ``allowed``.
    """
    if groups is None:
        return max(g for g in allowed if g <= paper)
    ok = is_int(groups) and groups in allowed
    check(ok, where, name, groups, f"{allowed}, or [] for the paper's {paper} adapted to C")
    return groups
