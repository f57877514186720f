"""Each block has one forward, the one its equations describe: it runs every convolution and linear layer it owns
as that module (what quantization tools wrap; a functional call on their weights would escape them), keeps the
input's memory layout, and equals its reference on yolo11n's own maps at 640 (P3 1×128×80×80, P4 1×128×40×40, P5
1×256×20×20) in eval and in training. (The CPU-only second forwards of CAA, SK, MLCA, CoordAtt, ELA, NAM and
TripletAttention are gone: docs/benchmarks/blocks.md has the overheads in the deployed runtimes without them.)"""

import pytest
import torch
import torch.nn.functional as F
from conftest import randomized, x64
from test_sk_biformer import sk_reference

from attn_yolo.nn import SKAttention
from attn_yolo.nn.mlca import adaptive_avg_pool, adaptive_pool_matrix
from attn_yolo.registry import BLOCKS

TOL = {"atol": 1e-6, "rtol": 0}
YOLO11N_MAPS = [(128, 80), (128, 40), (256, 20)]
LAYERS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Linear)


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("c, s", YOLO11N_MAPS)
def test_sk_equals_paper_on_yolo11n_maps(c, s, train):
    """SKAttention at yolo11n's P3/P4/P5 widths, eval and training (batch statistics), against Eqs. 1-6."""
    m = randomized(SKAttention(c)).train(train)
    x = x64(2 if train else 1, c, s, s)
    with torch.no_grad():
        y = m(x)
    torch.testing.assert_close(y, sk_reference(m, x, train, True), **TOL)
    xg = x.clone().requires_grad_()
    torch.testing.assert_close(m(xg).detach(), y, **TOL)  # with autograd: the same single path


@pytest.mark.parametrize("hw, size", [((80, 80), (5, 5)), ((20, 20), (5, 5)), ((7, 11), (3, 4)), ((5, 5), (80, 80)),
                                      ((3, 4), (7, 11)), ((5, 5), (5, 5))])
def test_mlca_pooling_both_ways_has_adaptive_windows(hw, size):
    """``adaptive_avg_pool`` (matrix products of ``adaptive_pool_matrix``, pooling and un-pooling alike) equals
    ``F.adaptive_avg_pool2d``."""
    x = x64(2, 3, *hw)
    ref = F.adaptive_avg_pool2d(x, size)
    ph, pw = adaptive_pool_matrix(hw[0], size[0], x), adaptive_pool_matrix(hw[1], size[1], x)
    torch.testing.assert_close(ph @ (x @ pw.T), ref, **TOL)
    torch.testing.assert_close(adaptive_avg_pool(x, *size), ref, **TOL)


@pytest.mark.parametrize("name", list(BLOCKS))
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_every_conv_and_linear_runs_as_its_module(name, mode):
    """Every ``nn.Conv1d`` / ``nn.Conv2d`` / ``nn.Linear`` a block owns is called as a module on every forward, with
    and without autograd, and the output is what it computes: zeroing one layer's weight through a wrapper (as a
    quantizer's observer would see it) changes the output, so no path reads the weight functionally around it."""
    m = (BLOCKS[name](64, hidden=8) if name == "Placebo" else BLOCKS[name](64)).train(mode == "train")
    layers = [mod for mod in m.modules() if isinstance(mod, LAYERS)]  # none in SimAM, NAM, ShuffleAttention
    x = torch.randn(2, 64, 24, 20)
    calls = []
    for mod in layers:
        mod.register_forward_hook(lambda mod, i, o: calls.append(mod))
    for grad in (False, True):
        calls.clear()
        with torch.set_grad_enabled(grad):
            m(x)
        assert {id(c) for c in calls} == {id(c) for c in layers}, (name, mode, grad)


@pytest.mark.parametrize("name", list(BLOCKS))
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_every_block_keeps_the_input_layout(name, mode):
    """An NCHW input gives an NCHW (contiguous) output, with and without autograd: a block that handed on another
    layout would change the speed of every layer after it (PyTorch's CPU convs run channels-last at another speed),
    so its measured overhead would not be its own."""
    m = (BLOCKS[name](64, hidden=8) if name == "Placebo" else BLOCKS[name](64)).train(mode == "train")
    x = torch.randn(2, 64, 24, 20)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            y = m(x)
        assert y.shape == x.shape and y.is_contiguous(), (name, mode, grad, y.stride())
