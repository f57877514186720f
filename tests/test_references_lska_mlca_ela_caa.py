"""LSKA, MLCA, ELA and CAA against float64 references written from their papers' equations with explicit ops (shifted
sums for convolutions, loops for pools and norms; none of the blocks' own code), plus the kernel table, gradcheck,
autocast against fp32, every yolo11 scale, weights-only reload and the registry's names."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import bn, x64
from conftest import randomized as _randomized

import attn_yolo
from attn_yolo import AttnBuildError
from attn_yolo.nn import CAA, ELA, LSKA, MLCA
from attn_yolo.nn.lska import LSKA_KERNELS
from attn_yolo.registry import ALIASES, NOT_PROVIDED


def randomized(m, seed: int = 0, std: float = 0.5):
    """``conftest.randomized`` with this file's weight scale (0.5)."""
    return _randomized(m, seed, std)


FAMILIES = ["LSKA", "MLCA", "ELA", "CAA"]
TOL = {"atol": 1e-6, "rtol": 0}


def capture(m: torch.nn.Module, names: list[str]) -> dict[str, torch.Tensor]:
    seen = {}
    for n in names:
        m.get_submodule(n).register_forward_hook(lambda mod, i, o, n=n: seen.__setitem__(n, o))
    return seen


def shift(x: torch.Tensor, dim: int, s: int) -> torch.Tensor:
    """``out[..., i, ...] = x[..., i + s, ...]`` along ``dim``, zero where ``i + s`` falls outside (zero padding)."""
    n = x.shape[dim]
    out = torch.zeros_like(x)
    lo, hi = max(0, -s), min(n, n - s)
    if hi > lo:
        out.narrow(dim, lo, hi - lo).copy_(x.narrow(dim, lo + s, hi - lo))
    return out


def dw_taps(x: torch.Tensor, w: torch.Tensor, dim: int, dilation: int = 1, bias=None) -> torch.Tensor:
    """Depthwise 1-D correlation along ``dim`` of a ``(B, C, ...)`` tensor, centred, zero padded: taps ``w`` ``(C, K)``,
    ``out_c(i) = Σ_t w_c(t) x_c(i + (t − K//2)·dilation) + bias_c``."""
    k = w.shape[1]
    view = [1, -1] + [1] * (x.dim() - 2)
    out = sum(w[:, t].view(view) * shift(x, dim, (t - k // 2) * dilation) for t in range(k))
    return out if bias is None else out + bias.view(view)


def pointwise(x: torch.Tensor, w: torch.Tensor, b=None) -> torch.Tensor:
    """1×1 conv ``C_in → C_out``: ``einsum`` with the weight ``(C_out, C_in)``."""
    out = torch.einsum("oc,bchw->bohw", w, x)
    return out if b is None else out + b.view(1, -1, 1, 1)


def windows(n_in: int, n_out: int) -> list[range]:
    """Adaptive average pooling's windows (as in PyTorch and the paper's LAP/UNAP): ⌊i·n/m⌋ .. ⌈(i+1)·n/m⌉ − 1."""
    return [range(i * n_in // n_out, math.ceil((i + 1) * n_in / n_out)) for i in range(n_out)]


def adaptive_mean(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Adaptive average pooling by loops over the windows, any size in or out."""
    out = x.new_zeros(*x.shape[:2], h, w)
    for i, rows in enumerate(windows(x.shape[2], h)):
        for j, cols in enumerate(windows(x.shape[3], w)):
            out[:, :, i, j] = x[:, :, rows.start : rows.stop, cols.start : cols.stop].mean((2, 3))
    return out


# ------------------------------------------------------------------------------------------------------------- LSKA
@pytest.mark.parametrize("k", [7, 23])
def test_lska_equals_paper(k):
    """A = Conv1×1(DW-D_{k_d×1}(DW-D_{1×k_d}(DW_{(2d−1)×1}(DW_{1×(2d−1)}(x))))), y = A ⊙ x."""
    m = randomized(LSKA(6, k=k))
    x = x64(2, 6, 9, 11)
    k0, kd, d = LSKA_KERNELS[k]
    a = dw_taps(x, m.conv0h.weight[:, 0, 0, :], 3, 1, m.conv0h.bias)  # 1×(2d−1), along W
    a = dw_taps(a, m.conv0v.weight[:, 0, :, 0], 2, 1, m.conv0v.bias)  # (2d−1)×1, along H
    a = dw_taps(a, m.conv_spatial_h.weight[:, 0, 0, :], 3, d, m.conv_spatial_h.bias)  # dilated, along W
    a = dw_taps(a, m.conv_spatial_v.weight[:, 0, :, 0], 2, d, m.conv_spatial_v.bias)  # dilated, along H
    a = pointwise(a, m.conv1.weight[:, :, 0, 0], m.conv1.bias)
    seen = capture(m, ["gate"])
    torch.testing.assert_close(m(x), a * x, **TOL)
    torch.testing.assert_close(seen["gate"], a, **TOL)
    assert m.conv0h.kernel_size == (1, k0) and m.conv_spatial_v.kernel_size == (kd, 1)


@pytest.mark.parametrize("k", list(LSKA_KERNELS))
def test_lska_receptive_field_is_k(k):
    """The table's (2d − 1, k_d, d) see exactly k×k pixels: a unit impulse spreads over a k×k square, gap-free."""
    m = LSKA(1, k=k).double()
    for conv in (m.conv0h, m.conv0v, m.conv_spatial_h, m.conv_spatial_v):
        conv.weight.data.fill_(1.0)
        conv.bias.data.zero_()
    n = k + 8
    x = torch.zeros(1, 1, n, n, dtype=torch.float64)
    x[0, 0, n // 2, n // 2] = 1
    a = m.conv_spatial_v(m.conv_spatial_h(m.conv0v(m.conv0h(x))))[0, 0]
    rows, cols = (a.abs() > 0).nonzero().unbind(1)
    assert (rows.max() - rows.min() + 1, cols.max() - cols.min() + 1) == (k, k)
    assert (a[n // 2 - k // 2 : n // 2 + k // 2 + 1, n // 2 - k // 2 : n // 2 + k // 2 + 1] > 0).all()
    assert list(LSKA_KERNELS) == [7, 11, 23, 35, 41, 53]


# ------------------------------------------------------------------------------------------------------------- MLCA
def mlca_reference(m: MLCA, x: torch.Tensor) -> torch.Tensor:
    """LAP to s×s, GAP of it, ECA 1-D convs (the local one over the cell-major sequence), sigmoids, the λ mix and
    UNAP back to H×W (adaptive windows by loops), per image."""
    b, c, h, w = x.shape
    s, lam = m.local_size, m.local_weight
    wg, wl = m.conv.weight.view(-1), m.conv_local.weight.view(-1)
    out = torch.empty_like(x)
    for i in range(b):
        local = adaptive_mean(x[i : i + 1], s, s)[0]  # (C, s, s)
        glob = local.mean((1, 2))  # (C,): the mean of the s×s cells
        g = torch.sigmoid(dw_taps(glob.view(1, 1, c), wg.view(1, -1), 2))[0, 0]  # (C,)
        seq = torch.stack([local[ch, p // s, p % s] for p in range(s * s) for ch in range(c)])  # cell-major
        conv = torch.sigmoid(dw_taps(seq.view(1, 1, -1), wl.view(1, -1), 2))[0, 0]
        cells = [(r * s + q) * c for r in range(s) for q in range(s)]  # where each cell's C values start
        gl = torch.stack([torch.stack([conv[p + ch] for p in cells]) for ch in range(c)])
        mix = lam * gl.view(c, s, s) + (1 - lam) * g.view(c, 1, 1)
        out[i] = x[i] * adaptive_mean(mix[None], h, w)[0]
    return out


@pytest.mark.parametrize("c, s, hw", [(16, 5, (10, 15)), (8, 3, (7, 11)), (32, 5, (4, 3))])
def test_mlca_equals_paper(c, s, hw):
    m = randomized(MLCA(c, local_size=s, local_weight=0.3))
    assert m.k == 2 * math.floor(((math.log2(c) + 1) / 2) / 2) + 1  # ECA's rule, γ = 2, b = 1
    x = x64(2, c, *hw)
    seen = capture(m, ["gate", "gate_local", "gate_global"])
    torch.testing.assert_close(m(x), mlca_reference(m, x), **TOL)
    assert seen["gate"].shape == x.shape and seen["gate_local"].shape == (2, c, s, s)
    assert 0 <= seen["gate"].min() and seen["gate"].max() <= 1
    torch.testing.assert_close(adaptive_mean(x, 4, 5), F.adaptive_avg_pool2d(x, (4, 5)), **TOL)  # the windows


def test_mlca_images_keep_their_own_global_gate():
    """The authors' code spreads the global gate with an adaptive pool over the batch axis; here image 0's output does
    not change when image 1 changes."""
    m = randomized(MLCA(16))
    x = x64(2, 16, 8, 8)
    y0 = m(x)[0]
    x[1] *= -3
    torch.testing.assert_close(m(x)[0], y0, rtol=0, atol=0)


# -------------------------------------------------------------------------------------------------------------- ELA
def group_norm(t: torch.Tensor, mod: torch.nn.GroupNorm) -> torch.Tensor:
    """GroupNorm by loops: each image, each group of C/G channels normalised over (channels, length)."""
    b, c, n = t.shape
    cg = c // mod.num_groups
    out = torch.empty_like(t)
    for i in range(b):
        for g in range(mod.num_groups):
            v = t[i, g * cg : (g + 1) * cg]
            out[i, g * cg : (g + 1) * cg] = (v - v.mean()) / torch.sqrt(v.var(unbiased=False) + mod.eps)
    return out * mod.weight.view(1, -1, 1) + mod.bias.view(1, -1, 1)


def grouped_conv1d(z: torch.Tensor, w: torch.Tensor, groups: int) -> torch.Tensor:
    """1-D grouped conv ``(B, C, N)``, weight ``(C, C/groups, K)``, no bias, zero padding K//2, by shifted sums."""
    c, per, k = w.shape
    out = torch.zeros_like(z)
    for o in range(c):
        g0 = (o // per) * per  # first input channel of output channel o's group
        for i in range(per):
            out[:, o] += dw_taps(z[:, g0 + i : g0 + i + 1], w[o : o + 1, i], 2)[:, 0]
    return out


@pytest.mark.parametrize("variant, c, conv_groups, gn", [("T", 32, 32, 32), ("B", 32, 32, 16), ("S", 32, 4, 16),
                                                         ("L", 16, 2, 16), ("T", 24, 24, 24), ("B", 24, 24, 12)])
def test_ela_equals_paper(variant, c, conv_groups, gn):
    """y^h = σ(G_n(F(z^h))), y^w = σ(G_n(F(z^w))), y = x ⊙ y^h ⊙ y^w; one F and one G_n for both directions."""
    m = randomized(ELA(c, variant=variant))
    assert (m.conv.groups, m.gn.num_groups, m.k) == (conv_groups, gn, {"T": 5, "B": 7, "S": 5, "L": 7}[variant])
    x = x64(2, c, 6, 9)
    seen = capture(m, ["gate_h", "gate_w"])
    zh, zw = x.sum(3) / x.shape[3], x.sum(2) / x.shape[2]
    yh = torch.sigmoid(group_norm(grouped_conv1d(zh, m.conv.weight, conv_groups), m.gn))
    yw = torch.sigmoid(group_norm(grouped_conv1d(zw, m.conv.weight, conv_groups), m.gn))
    torch.testing.assert_close(m(x), x * yh[:, :, :, None] * yw[:, :, None, :], **TOL)
    torch.testing.assert_close(seen["gate_h"][..., 0], yh, **TOL)
    torch.testing.assert_close(seen["gate_w"][:, :, 0], yw, **TOL)


# -------------------------------------------------------------------------------------------------------------- CAA
@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "no-grad"])
@pytest.mark.parametrize("train", [False, True])
def test_caa_equals_paper(train, grad):
    """F_pool = Conv1×1(P_avg(x)) (7×7 mean, zero padding counted), F_w = DW_{1×k_b}, F_h = DW_{k_b×1},
    A = σ(Conv1×1(F_h)), y = A ⊙ x; the 1×1 convs with BN and SiLU; in train and eval, with and without autograd
    (one path), against the same reference."""
    m = randomized(CAA(8, h_kernel_size=5, v_kernel_size=7)).train(train)
    x = x64(2, 8, 9, 10)
    seen = capture(m, ["gate"])
    with torch.set_grad_enabled(grad):
        y = m(x)
    pool = sum(shift(shift(x, 2, i), 3, j) for i in range(-3, 4) for j in range(-3, 4)) / 49  # 49 shifted copies
    silu = lambda t: t * torch.sigmoid(t)  # noqa: E731
    f = silu(bn(pointwise(pool, m.conv1[0].weight[:, :, 0, 0]), m.conv1[1], train))
    f = dw_taps(f, m.h_conv.weight[:, 0, 0, :], 3, 1, m.h_conv.bias)  # 1×k_b along W
    f = dw_taps(f, m.v_conv.weight[:, 0, :, 0], 2, 1, m.v_conv.bias)  # k_b×1 along H
    a = torch.sigmoid(silu(bn(pointwise(f, m.conv2[0].weight[:, :, 0, 0]), m.conv2[1], train)))
    torch.testing.assert_close(seen["gate"], a, **TOL)
    torch.testing.assert_close(y, a * x, **TOL)


# ----------------------------------------------------------------------------------------------------------- shared
MAKE = {
    "LSKA": lambda: LSKA(4, k=11),
    "MLCA": lambda: MLCA(8, local_size=3),
    "ELA": lambda: ELA(8, variant="S"),
    "CAA": lambda: CAA(4, 3, 5),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_gradcheck_float64(name):
    torch.manual_seed(0)
    m = MAKE[name]().double().train()
    x = torch.randn(2, m.c1, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,), eps=1e-6, atol=1e-4, fast_mode=True)


@pytest.mark.parametrize("dtype, tol", [(torch.float16, 0.01), (torch.bfloat16, 0.05)])
@pytest.mark.parametrize("name", FAMILIES)
def test_autocast_large_inputs_finite_and_close_to_fp32(name, dtype, tol):
    """Inputs ×300 under CPU autocast: finite, and within ``tol`` (relative L2) of the fp32 output; a block that
    returned zeros or its input would be off by about 1."""
    torch.manual_seed(0)
    m = attn_yolo.MODULES[name](64).eval()
    x = torch.randn(2, 64, 12, 10) * 300
    with torch.no_grad():
        ref = m(x)
        with torch.autocast("cpu", dtype=dtype):
            y = m(x)
    assert torch.isfinite(y).all()
    err = ((y.float() - ref).norm() / ref.norm()).item()
    assert err < tol, err
    assert ((x - ref).norm() / ref.norm()).item() > 10 * tol  # the block changes its input by more than tol


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: LSKA(64, k=9), r"^LSKA: k=9 is invalid; allowed: one of \[7, 11, 23, 35, 41, 53\]"),
        (lambda: LSKA(64, k=7.0), r"^LSKA: k=7.0 is invalid"),
        (lambda: MLCA(64, local_size=0), r"^MLCA: local_size=0 is invalid; allowed: an int in 1..32"),
        (lambda: MLCA(64, local_size=256), r"^MLCA: local_size=256 is invalid"),
        (lambda: MLCA(64, local_weight=1.5), r"^MLCA: local_weight=1.5 is invalid; allowed: a number in \[0, 1\]"),
        (lambda: MLCA(64, gamma=0), r"^MLCA: gamma=0 is invalid; allowed: a number > 0"),
        (lambda: MLCA(64, b=float("nan")), r"^MLCA: b=nan is invalid"),
        (lambda: ELA(64, variant="X"), r"^ELA: variant='X' is invalid; allowed: 'T', 'B', 'S' or 'L'"),
        (lambda: ELA(64, variant=7), r"^ELA: variant=7 is invalid"),
        (lambda: ELA(12, variant="S"), r"^ELA: variant='S' needs C divisible by 8 \(conv groups C/8\); C=12"),
        (lambda: CAA(64, h_kernel_size=4), r"^CAA: h_kernel_size=4 is invalid; allowed: a positive odd int <= 63"),
        (lambda: CAA(64, v_kernel_size=101), r"^CAA: v_kernel_size=101 is invalid"),
        (lambda: CAA(0), r"^CAA: input channels c1=0; expected a positive int"),
    ],
)
def test_bad_hyperparameters(make, match):
    with pytest.raises(AttnBuildError, match=match):
        make()


def test_names_and_aliases():
    assert [attn_yolo.MODULES[n].__module__ for n in FAMILIES] == [f"attn_yolo.nn.{n.lower()}" for n in FAMILIES]
    names = {"MLCAAttention": "MLCA", "EfficientLocalizationAttention": "ELA", "ContextAnchorAttention": "CAA",
             "LargeSeparableKernelAttention": "LSKA"}
    assert {k: ALIASES[k] for k in names} == names
    # other blocks under similar names are refused, never built as these: LSKNet's selective kernel, VAN's block
    assert {"LSKAttention", "LSKA_Attention", "LSKBlock"} <= set(NOT_PROVIDED)
    assert not set(FAMILIES) & set(NOT_PROVIDED)


# ---------------------------------------------------------------------------------------------------- in a model
@pytest.mark.parametrize("base", ["yolo11n", "yolo11s", "yolo11m", "yolo11l", "yolo11x"])
def test_every_yolo11_scale_square_and_rectangular(base):
    """The four blocks chained after each backbone output of every yolo11 scale, widths from the rows: training
    forward and backward on a rectangular batch, eval forward square and rectangular (the parsed layers run
    directly, as ``DetectionModel._predict_once``)."""
    from ultralytics.nn import tasks

    from attn_yolo.insertion import insert_dict

    d = insert_dict(f"{base}.yaml", FAMILIES, at="backbone", check=False)
    layers, save = tasks.parse_model(d, 3, verbose=False)
    blocks = [m for m in layers if type(m) in attn_yolo.MODULES.values()]
    assert [type(m).__name__ for m in blocks] == FAMILIES * 3
    widths = {"yolo11n": [128, 128, 256], "yolo11s": [256, 256, 512], "yolo11m": [512] * 3, "yolo11l": [512] * 3,
              "yolo11x": [768] * 3}[base]
    assert [m.c1 for m in blocks] == [c for c in widths for _ in FAMILIES]

    def run(x):
        y = []
        for m in layers:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in save else None)
        return x

    def total(out):
        return out.float().sum() if isinstance(out, torch.Tensor) else sum(total(o) for o in (
            out.values() if isinstance(out, dict) else out))

    layers.train()
    total(run(torch.rand(2, 3, 64, 96))).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for b in blocks for p in b.parameters())
    layers.eval()
    with torch.no_grad():
        for shape in [(1, 3, 64, 64), (1, 3, 96, 64)]:
            out = run(torch.rand(shape))
            assert out[0].shape[:2] == (1, 84) and torch.isfinite(out[0]).all()


def test_weights_only_reload_keeps_outputs(tmp_path):
    """A detector with the four blocks saved as a checkpoint reloads weights-only (Ultralytics' loader with
    ``torch.load(weights_only=True)``, the blocks allow-listed by ``import attn_yolo``) and predicts the same."""
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.checkpoint import load_yolo, save_checkpoint

    rows = [[-1, 1, "Conv", [32, 3, 2]], [-1, 1, "LSKA", [11]], [-1, 1, "MLCA", []], [-1, 1, "ELA", ["T"]],
            [-1, 1, "CAA", [11, 11, 0.0]]]
    d = {"nc": 2, "backbone": rows, "head": [[[-1], 1, "Detect", ["nc"]]]}
    torch.manual_seed(0)
    model = DetectionModel(d, verbose=False).eval()
    path = save_checkpoint(model, tmp_path / "fam.pt")
    loaded = load_yolo(str(path)).model.float().eval()
    assert [type(m).__name__ for m in loaded.model[1:5]] == FAMILIES
    assert loaded.model[4].scale is not None and loaded.model[4].h_kernel_size == 11  # [11, 11, 0.0]: init_values
    assert loaded.model[1].k == 11 and loaded.model[3].variant == "T"
    x = torch.rand(1, 3, 64, 96)
    with torch.no_grad():
        a, b = model.half().float()(x)[0], loaded(x)[0]  # the checkpoint stores FP16, as Ultralytics saves
    torch.testing.assert_close(a, b)


def test_modules_listing_names_the_four(capsys):
    from attn_yolo.cli import modules_main

    assert modules_main([]) == 0
    out = capsys.readouterr().out
    for line in ("LSKA", "[k=7, init_values=None]", "MLCA", "[local_size=5, gamma=2, b=1, local_weight=0.5",
                 "ELA", "[variant=B, init_values=None]", "CAA", "[h_kernel_size=11, v_kernel_size=11",
                 "also named: MLCAAttention, MixedLocalChannelAttention", "also named: ContextAnchorAttention"):
        assert line in out, line


# ------------------------------------------------------------------- CoordAtt, NAM, Triplet: the cheaper forward
@pytest.mark.parametrize("name", ["CoordAtt", "NAM", "TripletAttention", "ELA"])
@pytest.mark.parametrize("train", [False, True])
def test_inference_path_equals_autograd_path_and_keeps_gates(name, train):
    """Without autograd these write their product into a buffer of their own (in place); the output equals the
    autograd path to 1e-6 (that path is checked against the float64 references in ``test_block_references``), the
    input and the recorded gate outputs (what heatmaps read) are untouched."""
    torch.manual_seed(0)
    cls = attn_yolo.MODULES[name]
    a, b = cls(24).train(train), cls(24).train(train)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 24, 9, 13) * 3
    x0 = x.clone()
    gates = [n for n, m in a.named_modules() if isinstance(m, torch.nn.Sigmoid)]
    seen_a, seen_b = capture(a, gates), capture(b, gates)
    y_grad = a(x)
    with torch.no_grad():
        y = b(x)
    assert y_grad.requires_grad and not y.requires_grad and torch.equal(x, x0)
    torch.testing.assert_close(y, y_grad.detach(), **TOL)
    for n in gates:
        torch.testing.assert_close(seen_b[n], seen_a[n].detach(), **TOL)
        assert seen_b[n].data_ptr() != y.data_ptr()
    if name == "NAM":  # the folded BatchNorm updates its running statistics as nn.BatchNorm2d does
        ref = torch.nn.BatchNorm2d(24, momentum=a.bn.momentum).train(train)  # fresh, as a and b were
        ref(x)
        for k in ("running_mean", "running_var", "num_batches_tracked"):
            torch.testing.assert_close(getattr(a.bn, k), getattr(ref, k), rtol=0, atol=1e-7)
            torch.testing.assert_close(getattr(b.bn, k), getattr(ref, k), rtol=0, atol=1e-7)
        assert int(b.bn.num_batches_tracked) == int(train)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["LSKA", [256, 11]], {"k": 11}),  # channel count first, as the collections write LSKA(c1, k_size)
        (["LSKA", [23]], {"k": 23}),
        (["MLCA", [256]], {"local_size": 5, "local_weight": 0.5}),
        (["MLCA", [3, 2, 1, 0.25]], {"local_size": 3, "local_weight": 0.25}),
        (["ELA", [256, "S"]], {"variant": "S"}),
        (["ContextAnchorAttention", [256, 7, 9]], {"h_kernel_size": 7, "v_kernel_size": 9}),
        (["EfficientLocalizationAttention", []], {"variant": "B"}),
    ],
)
def test_yaml_rows_read_as_public_yamls_write_them(args, expected):
    """Rows as public YAMLs write them: a leading channel count (256 before width scaling) is dropped, aliases build
    the block, the rest are the hyperparameters in signature order."""
    from ultralytics.nn.tasks import DetectionModel

    name, a = args
    d = {"nc": 2, "scales": {"n": [0.5, 0.25, 1024]}, "scale": "n",
         "backbone": [[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "Conv", [256, 3, 2]], [-1, 1, name, a]],
         "head": [[[-1], 1, "Detect", ["nc"]]]}
    block = DetectionModel(d, verbose=False).model[2]
    assert block.c1 == 64 and type(block).__name__ == ALIASES.get(name, name)
    assert {k: getattr(block, k) for k in expected} == expected


def test_yaml_row_out_of_range_names_row_and_value():
    from ultralytics.nn.tasks import DetectionModel

    rows = [[-1, 1, "Conv", [32, 3, 2]], [-1, 1, "LSKA", [9]]]
    d = {"nc": 2, "backbone": rows, "head": [[[-1], 1, "Detect", ["nc"]]]}
    with pytest.raises(AttnBuildError, match=r"^row 1 LSKA: k=9 is invalid; allowed: one of \[7, 11, 23, 35, 41, 53\]"):
        DetectionModel(d, verbose=False)


@pytest.mark.parametrize("name", ["CoordAtt", "NAM", "TripletAttention", "ELA"])
def test_inference_exports_under_no_grad(name):
    """``torch.onnx.export`` traces under ``no_grad`` here, and onnxruntime reproduces the block."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import io

    torch.manual_seed(0)
    m = attn_yolo.MODULES[name](16).eval()
    x = torch.randn(1, 16, 9, 13)
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(m, (x,), f, opset_version=18, dynamo=False, input_names=["x"])
        ref = m(x).numpy()
    onnx.checker.check_model(onnx.load_from_string(f.getvalue()))
    out = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    assert abs(out - ref).max() < 1e-5
