"""The cheaper forwards of CAA, SKAttention, MLCA and TripletAttention (issue 23's overhead work) equal the
plain computation to 1e-6 on yolo11n's own maps at 640 (P3 1×128×80×80, P4 1×128×40×40, P5 1×256×20×20), in eval and
in training, keep the input's memory layout, and export as the graph onnxruntime runs fast (widened groups, constant
weights)."""

import io

import pytest
import torch
import torch.nn.functional as F
from conftest import randomized, x64
from test_sk_biformer import grouped_conv, sk_reference

from attn_yolo.nn import CAA, SKAttention
from attn_yolo.nn.common import gate_product
from attn_yolo.nn.mlca import adaptive_avg_pool, adaptive_pool_matrix
from attn_yolo.nn.sk import SKBranches, merge_factor
from attn_yolo.registry import BLOCKS

TOL = {"atol": 1e-6, "rtol": 0}
YOLO11N_MAPS = [(128, 80), (128, 40), (256, 20)]


@pytest.mark.parametrize("c, s", YOLO11N_MAPS)
def test_caa_fast_path_equals_conv_path_on_yolo11n_maps(c, s, monkeypatch):
    """Eval without autograd (``fast_logits``: GEMMs across layouts, pool after the first 1×1 conv) against the conv
    path of the same block (autograd on), float64; the gate the hooks record too; the output stays NCHW."""
    m = randomized(CAA(c)).eval()
    x = x64(1, c, s, s)
    calls, fast = [], m.fast_logits
    monkeypatch.setattr(m, "fast_logits", lambda t: calls.append(1) or fast(t))
    with torch.no_grad():
        y_own = m(x)  # no hook on the gate: sigmoid and product in the block's own buffer
    gates = []
    m.gate.register_forward_hook(lambda mod, i, o: gates.append(o))
    with torch.no_grad():
        y_fast = m(x)
    y_ref = m(x)  # autograd enabled: the conv path
    assert calls == [1, 1]  # the fast path ran twice, the conv path did not call it
    torch.testing.assert_close(y_own, y_ref.detach(), **TOL)
    torch.testing.assert_close(y_fast, y_ref.detach(), **TOL)
    torch.testing.assert_close(gates[0], gates[1].detach(), **TOL)
    assert y_fast.is_contiguous() and float(y_fast.sub(x).abs().max()) > 0.1  # NCHW, and not the identity


def test_caa_train_mode_and_autograd_take_the_conv_path():
    """Training (batch statistics) never takes the fast path, with or without autograd, and its values are the
    autograd path's; gradients flow as before."""
    m = randomized(CAA(16)).train()
    x = x64(2, 16, 12, 10)
    with torch.no_grad():
        assert not m.fast_path_ok(x)
        y0 = m(x)
    xg = x.clone().requires_grad_()
    y1 = m(xg)
    torch.testing.assert_close(y0, y1.detach(), **TOL)
    y1.sum().backward()
    assert torch.isfinite(xg.grad).all() and float(xg.grad.abs().sum()) > 0
    assert all(p.grad is not None for p in m.parameters())


@pytest.mark.parametrize("c, groups, f", [(128, 32, 2), (64, 32, 4), (40, 20, 4), (256, 32, 1), (24, 8, 4),
                                          (3, 3, 1), (96, 32, 4), (6, 2, 1)])
def test_sk_merge_factor(c, groups, f):
    """Groups merge only where a group has 2-7 channels; f divides G and brings the group to >= 8 channels."""
    assert merge_factor(c, groups) == f
    cg = c // groups
    if f > 1:  # the smallest divisor of G that reaches 8 channels per group
        assert groups % f == 0 and f * cg >= 8
        assert not any(groups % g == 0 and g * cg >= 8 for g in range(2, f))


@pytest.mark.parametrize("c, groups", [(128, 32), (64, 32), (40, 20), (96, 32)])
@pytest.mark.parametrize("dilation", [1, 2])
def test_sk_widened_weight_is_the_same_grouped_conv(c, groups, dilation):
    """The widened weight with G/f groups gives the G-group conv (written as G dense convs on the channel slices)."""
    torch.manual_seed(0)
    w = torch.randn(c, c // groups, 3, 3, dtype=torch.float64)
    x = x64(2, c, 9, 7)
    f = merge_factor(c, groups)
    assert f > 1
    wide = SKBranches.widened(w, groups, f)
    assert wide.shape == (c, f * c // groups, 3, 3)
    y = F.conv2d(x, wide, None, 1, dilation, dilation, groups // f)
    torch.testing.assert_close(y, grouped_conv(x, w, groups, dilation), **TOL)
    assert int((wide != 0).sum()) == w.numel()  # exactly f − 1 zero blocks per output channel


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("c, s", YOLO11N_MAPS)
def test_sk_equals_paper_on_yolo11n_maps(c, s, train):
    """SKAttention at yolo11n's P3/P4/P5 widths (4 channels per group at 128: merged; 8 at 256: as is), eval (BN
    folded into the convs) and training (batch statistics), against Eqs. 1-6 with the plain grouped convs."""
    m = randomized(SKAttention(c)).train(train)
    x = x64(2 if train else 1, c, s, s)
    with torch.no_grad():
        y = m(x)
    torch.testing.assert_close(y, sk_reference(m, x, train, True), **TOL)
    xg = x.clone().requires_grad_()
    torch.testing.assert_close(m(xg).detach(), y, **TOL)  # the autograd path gives the same values


def test_sk_exports_widened_constant_weights():
    """The ONNX graph has the branch convs with 8 channels per group as constant initializers (the widening and the
    BatchNorm fold are folded at export, nothing left to compute at run time), and runs equal to PyTorch."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import numpy_helper

    m = randomized(SKAttention(128)).float().eval()
    x = torch.randn(1, 128, 16, 16)
    buf = io.BytesIO()
    torch.onnx.export(m, x, buf, opset_version=18, dynamo=False, input_names=["x"])
    g = onnx.load_from_string(buf.getvalue()).graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    def group(n) -> int:
        return next((a.i for a in n.attribute if a.name == "group"), 1)

    grouped = [n for n in g.node if n.op_type == "Conv" and group(n) > 1]
    assert len(grouped) == 2
    for n in grouped:
        assert n.input[1] in inits and inits[n.input[1]].shape == (128, 8, 3, 3) and group(n) == 16
    assert not any(n.op_type == "BatchNormalization" for n in g.node)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        ref = m(x).numpy()
    assert abs(sess.run(None, {"x": x.numpy()})[0] - ref).max() <= 1e-6 * abs(ref).max()  # float32 rounding


def test_sk_hooked_convs_are_called_and_counted():
    """A hook on a branch conv (thop's, as Ultralytics' ``get_flops`` uses, or a user's) makes the branches call
    their modules: the hook fires, the values are the fast path's, and thop counts the grouped convs' MACs."""
    thop = pytest.importorskip("thop")
    m = randomized(SKAttention(128)).eval()
    x = x64(1, 128, 16, 16)
    with torch.no_grad():
        y_fast = m(x)
        seen = []
        h = m.branches.convs[1][0].register_forward_hook(lambda mod, i, o: seen.append(o.shape))
        y_hooked = m(x)
        h.remove()
    assert seen == [(1, 128, 16, 16)]
    torch.testing.assert_close(y_hooked, y_fast, **TOL)
    macs = thop.profile(SKAttention(128).eval(), inputs=[torch.empty(1, 128, 16, 16)], verbose=False)[0]
    assert macs >= 2 * 128 * 4 * 9 * 16 * 16  # two branches, 4 input channels per group, 3×3 taps, every pixel


@pytest.mark.parametrize("hw, size", [((80, 80), (5, 5)), ((20, 20), (5, 5)), ((7, 11), (3, 4)), ((5, 5), (80, 80)),
                                      ((3, 4), (7, 11)), ((5, 5), (5, 5))])
def test_mlca_pooling_both_ways_has_adaptive_windows(hw, size):
    """``adaptive_avg_pool`` (the fused op when pooling in eager mode, matrix products when un-pooling) and the
    matrix form that exports use (built from ``adaptive_pool_matrix`` here) both equal ``F.adaptive_avg_pool2d``."""
    x = x64(2, 3, *hw)
    ref = F.adaptive_avg_pool2d(x, size)
    ph, pw = adaptive_pool_matrix(hw[0], size[0], x), adaptive_pool_matrix(hw[1], size[1], x)
    torch.testing.assert_close(ph @ (x @ pw.T), ref, **TOL)
    torch.testing.assert_close(adaptive_avg_pool(x, *size), ref, **TOL)


def test_gate_product_leaves_what_a_hook_saw_untouched():
    """``gate_product`` writes into the block's own map only when nobody can see it: a hook on the gate (heatmaps
    record gates that way) gets the gate's values, unchanged after the product; autograd takes the plain product."""
    x, a = x64(1, 4, 6, 6), x64(1, 4, 6, 6, seed=2)
    gate = torch.nn.Sigmoid()
    with torch.no_grad():
        ref = x * torch.sigmoid(a)
        own = a.clone()
        torch.testing.assert_close(gate_product(gate, own, x), ref, **TOL)
        torch.testing.assert_close(own, ref, **TOL)  # in place: the map's buffer holds the product
        seen = []
        gate.register_forward_hook(lambda mod, i, o: seen.append(o))
        kept = a.clone()
        torch.testing.assert_close(gate_product(gate, kept, x), ref, **TOL)
        torch.testing.assert_close(seen[0], torch.sigmoid(a), **TOL)
        torch.testing.assert_close(kept, a, **TOL)
    ag = a.clone().requires_grad_()
    gate_product(gate, ag, x).sum().backward()
    assert ag.grad is not None


@pytest.mark.parametrize("name", [n for n in BLOCKS if n != "Placebo"])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_every_block_keeps_the_input_layout(name, mode):
    """An NCHW input gives an NCHW (contiguous) output, with and without autograd: a block that handed on another
    layout would change the speed of every layer after it (PyTorch's CPU convs run channels-last at another speed),
    so its measured overhead would not be its own. (MLCA's un-pooled gate once came out channels-last, and the whole
    model after it ran 10 % faster than the baseline.)"""
    m = BLOCKS[name](64).train(mode == "train")
    x = torch.randn(2, 64, 24, 20)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            y = m(x)
        assert y.shape == x.shape and y.is_contiguous(), (name, mode, grad, y.stride())
