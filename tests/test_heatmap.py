"""Attention heatmaps (attn_yolo.heatmap): captured maps, their statistics, PNG output, hooks, bad input.

Real photos: Ultralytics' bus.jpg and zidane.jpg. Model: a YOLO11n with every block (SE, CBAM, ECA, SAM, MHSA), saved
as a checkpoint after BatchNorm calibration on the photos (a cheap trained-ness proxy: at random init with unit BN
statistics, features shrink layer by layer and every gate sits at sigmoid(≈0) = 0.5, a uniform map). The opt-in
`slow` test trains the model on the synthetic dataset instead.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import importlib.util
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from attn_yolo import CBAM, ECA, MHSA, SAM, SE
from attn_yolo.args import UsageError
from attn_yolo.heatmap import (
    AttentionCapture,
    HeatmapError,
    NoAttentionError,
    figure_size,
    heatmaps,
    main,
    map_stats,
    predict_with_maps,
    save,
    stats_rows,
    write_stats,
)
from attn_yolo.images import default_sources, read_image
from attn_yolo.nn import CAA, ELA, EMA, GAM, LSKA, MLCA, NAM, CoordAtt, ShuffleAttention, SimAM, TripletAttention
from attn_yolo.nn.biformer import BiLevelRoutingAttention
from attn_yolo.nn.sk import SKAttention

IMGSZ = 192

ALL_BLOCKS_YAML = """
nc: 5
scales:
  n: [0.50, 0.25, 1024]
backbone:
  - [-1, 1, Conv, [64, 3, 2]] # 0
  - [-1, 1, Conv, [128, 3, 2]] # 1
  - [-1, 2, C3k2, [256, False, 0.25]] # 2
  - [-1, 1, Conv, [256, 3, 2]] # 3
  - [-1, 2, C3k2, [512, False, 0.25]] # 4
  - [-1, 1, SE, [16]] # 5
  - [-1, 1, CBAM, [16, 7]] # 6 P3/8
  - [-1, 1, Conv, [512, 3, 2]] # 7
  - [-1, 2, C3k2, [512, True]] # 8
  - [-1, 1, ECA, []] # 9
  - [-1, 1, SAM, [7]] # 10 P4/16
  - [-1, 1, Conv, [1024, 3, 2]] # 11
  - [-1, 2, C3k2, [1024, True]] # 12
  - [-1, 1, SPPF, [1024, 5]] # 13
  - [-1, 2, C2PSA, [1024]] # 14
  - [-1, 1, MHSA, [4]] # 15 P5/32
head:
  - [-1, 1, nn.Upsample, [None, 2, "nearest"]] # 16
  - [[-1, 10], 1, Concat, [1]] # 17
  - [-1, 2, C3k2, [512, False]] # 18
  - [-1, 1, nn.Upsample, [None, 2, "nearest"]] # 19
  - [[-1, 6], 1, Concat, [1]] # 20
  - [-1, 2, C3k2, [256, False]] # 21
  - [-1, 1, Conv, [256, 3, 2]] # 22
  - [[-1, 18], 1, Concat, [1]] # 23
  - [-1, 2, C3k2, [512, False]] # 24
  - [-1, 1, Conv, [512, 3, 2]] # 25
  - [[-1, 15], 1, Concat, [1]] # 26
  - [-1, 2, C3k2, [1024, True]] # 27
  - [[21, 24, 27], 1, Detect, [nc]] # 28
"""
EXPECTED = {  # layer -> (block, kinds, stride)
    5: ("SE", ["channel"], 8),
    6: ("CBAM", ["channel", "spatial"], 8),
    9: ("ECA", ["channel"], 16),
    10: ("SAM", ["spatial"], 16),
    15: ("MHSA", ["received"], 32),
}


def letterboxed(image: np.ndarray, imgsz: int = IMGSZ) -> torch.Tensor:
    from ultralytics.data.augment import LetterBox

    im = LetterBox(imgsz, auto=True, stride=32)(image=image)
    return torch.from_numpy(np.ascontiguousarray(im[..., ::-1].transpose(2, 0, 1)))[None].float() / 255


def no_hooks(model: nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def calibrate_bn(model: nn.Module, images: list[np.ndarray]) -> None:
    """Set every BatchNorm's running statistics to those of ``images`` (one train-mode forward, no weight update)."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: one batch → its statistics
    model.train()
    with torch.no_grad():
        model(torch.cat([letterboxed(cv2.resize(im, (160, 160)), 160) for im in images]))
    for m in bns:
        m.momentum = 0.03
    model.eval()


@pytest.fixture(scope="session")
def all_blocks_yaml(tmp_path_factory):
    path = tmp_path_factory.mktemp("yaml") / "yolo11n-allattn.yaml"  # scale n from the file name
    path.write_text(ALL_BLOCKS_YAML)
    return path


@pytest.fixture(scope="session")
def checkpoint(all_blocks_yaml, tmp_path_factory):
    from ultralytics import YOLO

    torch.manual_seed(0)
    yolo = YOLO(str(all_blocks_yaml))
    calibrate_bn(yolo.model, [read_image(p) for p in default_sources()])
    path = tmp_path_factory.mktemp("ckpt") / "best.pt"
    yolo.save(str(path))
    return path


@pytest.fixture(scope="session")
def model(checkpoint):
    from ultralytics import YOLO

    return YOLO(str(checkpoint)).model


@pytest.fixture(scope="session")
def items(checkpoint):
    """Heatmaps of bus.jpg and zidane.jpg, loaded from the checkpoint path, with query maps at detection centres."""
    return heatmaps(checkpoint, imgsz=IMGSZ, query="det")


class Tiny(nn.Module):
    """Minimal Ultralytics-style model (layers in ``self.model``) holding one of each block, stride 1."""

    def __init__(self, c: int = 16):
        super().__init__()
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), SE(c, 4), ECA(c), SAM(c), CBAM(c, 4), MHSA(c, 2))
        for m in self.model.modules():  # make every gate vary
            if isinstance(m, nn.Conv2d | nn.Conv1d):
                nn.init.normal_(m.weight, 0, 0.5)

    def forward(self, x):
        return self.model(x)


# -------------------------------------------------------------------------------------------------- maps on photos --
def test_maps_on_real_images_shapes_ranges_not_uniform(items):
    assert [it.path.name for it in items] == ["bus.jpg", "zidane.jpg"]
    for it in items:
        h_in, w_in = it.input_shape
        assert max(h_in, w_in) == IMGSZ and h_in % 32 == 0 and w_in % 32 == 0
        base = [(m.layer, m.block, m.kind, m.stride) for m in it.maps if not m.kind.startswith("query")]
        assert base == [(i, b, k, s) for i, (b, ks, s) in EXPECTED.items() for k in ks]
        assert len(it.result.boxes) > 0 and sum(m.kind.startswith("query") for m in it.maps) == 3
        for m in it.maps:
            assert m.map.shape == (h_in // m.stride, w_in // m.stride), m.name
            assert m.map.dtype == np.float32 and np.isfinite(m.map).all(), m.name
            assert m.map.min() >= 0 and m.map.max() <= 1, m.name
            assert m.map.max() - m.map.min() > 0.01 * m.map.mean() and not m.stats["flag"], f"{m.name}: {m.stats}"
            if m.block == "MHSA":  # attention received / of one query: a distribution over the N locations
                assert m.map.sum() == pytest.approx(1.0, abs=1e-4)
                assert m.check < 1e-4  # explicit attention reproduces the fused block's output
            assert 0.9 < m.stats["entropy_norm"] <= 1.0 + 1e-9  # a calibrated random model attends broadly
        # query maps: at the centres of the top detections, in original-image pixels
        boxes = it.result.boxes.xyxy[:3].numpy()
        centres = [tuple(m.query) for m in it.maps if m.kind.startswith("query")]
        np.testing.assert_allclose(centres, (boxes[:, :2] + boxes[:, 2:]) / 2, atol=1e-3)



def capture_with_io(net, x):
    """Run ``net`` on ``x`` under ``AttentionCapture``, also keeping each layer's input and output:
    ``(inputs, outputs, capture)``, the first two keyed by layer index."""
    ins, outs = {}, {}

    def keep(i):
        def hook(m, a, o):
            ins[i], outs[i] = a[0], o

        return hook

    hooks = [b.register_forward_hook(keep(i)) for i, b in enumerate(net.model)]
    with AttentionCapture(net) as cap, torch.no_grad():
        net(x)
    for h in hooks:
        h.remove()
    return ins, outs, cap

def test_channel_and_spatial_maps_match_block_outputs():
    """Independent check against the blocks' outputs: ``G = ‖y‖₁ / ‖x‖₁`` per location for SE/ECA, ``M = y / x``."""
    net = Tiny().eval()
    x = torch.randn(2, 3, 12, 10)
    ins, outs, cap = capture_with_io(net, x)
    for b in range(2):
        maps = {(m.layer, m.kind): m.map for m in cap.maps(b)}
        for i in (1, 2):  # SE, ECA: y = x ⊙ s
            g = outs[i][b].abs().sum(0) / ins[i][b].abs().sum(0)
            np.testing.assert_allclose(maps[i, "channel"], g.numpy(), rtol=1e-5)
        np.testing.assert_allclose(maps[3, "spatial"], (outs[3][b] / ins[3][b])[0].numpy(), rtol=1e-4)  # SAM
        cb, xi = net.model[4], ins[4][b : b + 1]
        with torch.no_grad():
            s = cb.channel(xi)
            np.testing.assert_allclose(maps[4, "spatial"], cb.spatial(xi * s)[0, 0].numpy(), rtol=1e-6)
        g = maps[4, "channel"]
        assert s.min() - 1e-6 <= g.min() and g.max() <= s.max() + 1e-6  # G lies in [min s, max s]
        assert all(m.stride == 1 and m.map.shape == (12, 10) for m in cap.maps(b))


def test_mhsa_explicit_weights_reproduce_fused_output():
    """softmax(QKᵀ/√d) of explicit_attention, pushed through the rest of the block by hand, equals the fused output."""
    torch.manual_seed(0)
    blk = MHSA(32, heads=4).eval()
    x = torch.randn(2, 32, 6, 7)
    with torch.no_grad():
        y = blk(x)  # fused SDPA
        _, w = blk.explicit_attention(x)
        assert w.shape == (2, 4, 42, 42)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 42))
        xp = x + blk.pos(x)
        t = xp.flatten(2).transpose(1, 2)
        _, _, v = blk.qkv_heads(blk.norm1(t))
        t = t + blk.proj((w @ v).transpose(1, 2).reshape(2, 42, 32))
        t = t + blk.mlp(blk.norm2(t))
        torch.testing.assert_close(t.transpose(1, 2).reshape_as(x), y, atol=1e-5, rtol=1e-5)
    # the captured map is these weights' mean over heads and queries; `check` is |explicit − fused|
    net = Tiny().eval()
    x = torch.randn(1, 3, 5, 6)
    seen = {}
    h = net.model[5].register_forward_hook(lambda m, a, o: seen.update(x=a[0], y=o))
    with AttentionCapture(net, layers=5) as cap, torch.no_grad():
        net(x)
    h.remove()
    (m,) = cap.maps()
    _, w = net.model[5].explicit_attention(seen["x"])
    np.testing.assert_allclose(m.map, w.mean((1, 2))[0].reshape(5, 6).numpy(), atol=1e-7)
    assert m.kind == "received" and m.check < 1e-5


def test_residual_gate_strength_reported():
    """Blocks built with init_values report mean |γ|; the explicit MHSA output still matches the gated block output."""
    torch.manual_seed(0)
    net = Tiny()
    net.model[1] = SE(16, 4, init_values=0.0)
    net.model[5] = MHSA(16, 2, init_values=0.25)
    with AttentionCapture(net) as cap, torch.no_grad():
        net.eval()(torch.randn(1, 3, 6, 6))
    gammas = {m.layer: m.gamma for m in cap.maps()}
    assert gammas == {1: 0.0, 2: None, 3: None, 4: None, 5: pytest.approx(0.25)}
    assert [m.check for m in cap.maps() if m.block == "MHSA"][0] < 1e-5


REPEATS_YAML = """
nc: 2
backbone:
  - [-1, 1, Conv, [16, 3, 2]] # 0
  - [-1, 1, Conv, [32, 3, 2]] # 1
  - [-1, 2, CBAM, [4, 3]] # 2: repeats 2, no depth scaling: nn.Sequential(CBAM, CBAM)
  - [-1, 1, Conv, [32, 3, 2]] # 3
  - [-1, 2, MHSA, [2]] # 4: nn.Sequential(MHSA, MHSA)
head:
  - [[2, 3, 4], 1, Detect, [nc]] # 5
"""


def test_blocks_inside_repeats_are_found(tmp_path):
    """A row with repeats > 1 is an nn.Sequential of blocks: every block is captured, named by its place in the layer,
    and each map is the one that block computed on its own input."""
    from ultralytics import YOLO

    path = tmp_path / "repeats.yaml"
    path.write_text(REPEATS_YAML)
    torch.manual_seed(0)
    net = YOLO(str(path)).model.eval()
    assert isinstance(net.model[2], nn.Sequential) and isinstance(net.model[4], nn.Sequential)
    ins = {}
    hooks = [net.model[2][k].register_forward_hook(lambda m, a, o, k=k: ins.update({k: a[0]})) for k in (0, 1)]
    x = torch.rand(1, 3, 64, 64)
    with AttentionCapture(net, layers="2,4") as cap, torch.no_grad():
        net(x)
    for h in hooks:
        h.remove()
    maps = cap.maps()
    assert [m.name for m in maps] == [
        "L02.0_CBAM_channel",
        "L02.0_CBAM_spatial",
        "L02.1_CBAM_channel",
        "L02.1_CBAM_spatial",
        "L04.0_MHSA_received",
        "L04.1_MHSA_received",
    ]
    by = {m.name: m for m in maps}
    for k in (0, 1):  # the spatial gate of repeat k on repeat k's own input
        cb, xi = net.model[2][k], ins[k]
        with torch.no_grad():
            want = cb.spatial(xi * cb.channel(xi))[0, 0].numpy()
        np.testing.assert_allclose(by[f"L02.{k}_CBAM_spatial"].map, want, rtol=1e-6)
    assert not np.allclose(by["L02.0_CBAM_spatial"].map, by["L02.1_CBAM_spatial"].map)
    assert all(m.check < 1e-5 for m in maps if m.block == "MHSA")
    with pytest.raises(HeatmapError, match=r"Attention layers: 2 \(CBAM \+ CBAM\), 4 \(MHSA \+ MHSA\)"):
        AttentionCapture(net, layers=3)
    rows = stats_rows([predict_with_maps(net, np.full((64, 64, 3), 127, np.uint8), imgsz=64, layers=2)])
    assert [(r["layer"], r["part"]) for r in rows] == [(2, "0"), (2, "0"), (2, "1"), (2, "1")]


def test_chunked_attention_maps_equal_unchunked():
    """Weights computed a few queries at a time give the same output, received map and query rows as the whole N×N
    matrix of MHSA.explicit_attention."""
    from attn_yolo.heatmap.maps import attention_rows, explicit_attention_maps

    torch.manual_seed(0)
    blk = MHSA(32, heads=4, init_values=0.5).eval()
    x = torch.randn(2, 32, 6, 7)  # N = 42
    y_full, w = blk.explicit_attention(x)  # (2, 4, 42, 42)
    for chunk in (5, 42, 100):  # ragged last chunk, exactly N, more than N
        y, maps = explicit_attention_maps(blk, x, chunk)
        torch.testing.assert_close(y, y_full, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(maps["received"], w.mean((1, 2)), atol=1e-7, rtol=1e-5)
        torch.testing.assert_close(maps["received"].sum(-1), torch.ones(2))
        for j in (0, 17, 41):
            torch.testing.assert_close(
                attention_rows(maps["q"][:, :, j : j + 1], maps["k"]), w[:, :, j : j + 1], atol=1e-7, rtol=1e-5
            )
    assert "attend" not in vars(blk)  # the block's own method is back
    # through the capture: query maps are rows of the same matrix
    net = Tiny().eval()
    seen = {}
    h = net.model[5].register_forward_hook(lambda m, a, o: seen.update(x=a[0]))
    with AttentionCapture(net, layers=5, chunk=4) as cap, torch.no_grad():
        net(torch.randn(1, 3, 5, 6))
    h.remove()
    received, q0 = cap.maps(0, [((3.5, 2.5), (3.5, 2.5))])
    _, w = net.model[5].explicit_attention(seen["x"])
    np.testing.assert_allclose(received.map, w.mean((1, 2))[0].reshape(5, 6).numpy(), atol=1e-7)
    np.testing.assert_allclose(q0.map, w.mean(1)[0, 2 * 6 + 3].reshape(5, 6).numpy(), atol=1e-7)


def test_chunked_attention_peak_memory_is_bounded():
    """Peak memory of the maps grows as N·chunk: 2304 tokens with 4 heads make an 81 MiB weight matrix, the chunked
    maps stay within the docstring's bound (two (B, h, chunk, N) float blocks plus the block's activations)."""
    from attn_yolo.bench.common import MIB, PeakMemory
    from attn_yolo.heatmap.maps import explicit_attention_maps

    torch.manual_seed(0)
    blk = MHSA(32, heads=4).eval()
    x = torch.randn(1, 32, 48, 48)
    n, chunk = 48 * 48, 64
    full_mib = 4 * n * n * 4 / MIB  # one (1, 4, N, N) fp32 matrix: 81 MiB
    explicit_attention_maps(blk, x, chunk)  # warm-up: one-time allocations are not the maps' memory
    probe = PeakMemory()
    probe.start()
    explicit_attention_maps(blk, x, chunk)
    chunked = probe.peak_mib()
    bound = 2 * 4 * chunk * n * 4 / MIB + 8  # 2 weight blocks (4.5 MiB) + activations (N·C floats, a few MiB)
    assert chunked <= bound, f"chunked maps took {chunked:.1f} MiB, bound {bound:.1f} MiB"
    probe.start()
    with torch.no_grad():
        blk.explicit_attention(x)  # the whole matrix: the probe does see it
    assert probe.peak_mib() >= full_mib


# --------------------------------------------------------------------------------------- predictions, hooks, model --
def same(a, b) -> bool:
    """Exact equality of nested model outputs (tensors, lists, tuples, dicts)."""
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return len(a) == len(b) and all(same(u, v) for u, v in zip(a, b))


def test_predictions_unchanged_and_no_hooks_left(model):
    x = letterboxed(read_image(default_sources()[0]))
    assert no_hooks(model)
    user = model.model[3].register_forward_hook(lambda *a: None)  # a hook of the user's own stays
    try:
        with torch.no_grad():
            y0 = model(x)
            with AttentionCapture(model) as cap:
                y1 = model(x)
            y2 = model(x)
        assert same(y0, y1) and same(y0, y2)
        assert len(cap.maps()) == 6
        assert list(model.model[3]._forward_hooks) == [user.id]
    finally:
        user.remove()
    assert no_hooks(model)


def test_same_input_as_ultralytics_predictor(checkpoint, model):
    """The letterboxed tensor the model sees equals the one YOLO.predict feeds it (rect letterbox, RGB, /255)."""
    from ultralytics import YOLO

    for src, imgsz in zip(default_sources()[1:] * 2, (IMGSZ, 100)):  # zidane.jpg: 16:9; 100 is rounded up to 128
        image, seen = read_image(src), []
        ref = YOLO(str(checkpoint))
        handles = [m.register_forward_pre_hook(lambda m, a: seen.append(a[0].clone())) for m in (model, ref.model)]
        try:
            it = predict_with_maps(model, image, imgsz=imgsz, layers=6)
            ref.predict(image, imgsz=imgsz, device="cpu", verbose=False)
        finally:
            for h in handles:
                h.remove()
        assert seen[0].shape[2:] == it.input_shape and torch.equal(seen[0], seen[-1])


def test_hooks_removed_after_exception_mid_capture(monkeypatch):
    net = Tiny().eval()
    with pytest.raises(RuntimeError), AttentionCapture(net), torch.no_grad():
        net(torch.randn(1, 5, 8, 8))  # wrong channel count: the first conv raises
    assert no_hooks(net)

    def boom(q, k):
        raise RuntimeError("explicit attention failed")

    monkeypatch.setattr("attn_yolo.heatmap.maps.attention_rows", boom)  # a failure inside our own hook
    with pytest.raises(RuntimeError, match="explicit attention failed"), AttentionCapture(net), torch.no_grad():
        net(torch.randn(1, 3, 8, 8))
    assert no_hooks(net) and "attend" not in vars(net.model[5])  # the block's own attend is back


def test_model_not_trained_or_changed(model):
    """Accepts the nn.Module; parameters, buffers and train/eval mode are left as they were."""
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    try:
        (it,) = heatmaps(model, default_sources()[1], imgsz=128, layers="10, 15", query="640,360")
        assert model.training
        assert [(m.layer, m.kind) for m in it.maps] == [(10, "spatial"), (15, "received"), (15, "query0")]
        assert it.maps[2].query == (640.0, 360.0) and it.maps[2].map.sum() == pytest.approx(1.0, abs=1e-5)
    finally:
        model.eval()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert no_hooks(model) and model.model[15].fused


# ----------------------------------------------------------------------------------------------- image + output --
def test_map_resized_onto_image_crops_letterbox_padding(items):
    from attn_yolo.heatmap import AttentionMap

    it = items[1]  # zidane 1280×720 → 192×128 input: 4 px of letterbox padding top and bottom
    h0, w0 = it.image.shape[:2]
    hi, wi = it.input_shape
    gain = min(hi / h0, wi / w0)
    pad_y = (hi - round(h0 * gain)) / 2
    assert pad_y > 0
    grid = np.zeros((hi // 8, wi // 8), np.float32)
    r, c = 2, 17
    grid[r, c] = 1.0
    up = it.on_image(AttentionMap(0, "SAM", "spatial", grid, 8))
    assert up.shape == (h0, w0)
    y, x = np.unravel_index(up.argmax(), up.shape)
    # centre of cell (r, c) in input pixels, minus the padding, divided by the letterbox gain
    tol = 1.5 / gain  # 1.5 input pixels; the padding alone shifts y by pad_y / gain = 4 / gain
    assert abs(x - (c + 0.5) * 8 / gain) <= tol and abs(y - ((r + 0.5) * 8 - pad_y) / gain) <= tol
    # query points go the other way (image → input pixels): Ultralytics' scale_boxes brings them back
    from ultralytics.utils.ops import scale_boxes

    from attn_yolo.heatmap.letterbox import letterbox_gain_pad

    gx, gy, px, py = letterbox_gain_pad((h0, w0), (hi, wi))
    pts = torch.tensor([[100.0, 50.0, 1000.0, 700.0]])
    fwd = pts * torch.tensor([gx, gy, gx, gy]) + torch.tensor([px, py, px, py])
    torch.testing.assert_close(scale_boxes((hi, wi), fwd, (h0, w0)), pts)


def test_png_npy_and_stats_written(items, tmp_path):
    item = dataclasses.replace(items[1], maps=items[1].maps[:4])  # 5 panels: 2 rows of 3 (fewer panels, faster)
    paths = save(item, tmp_path)
    png = cv2.imread(str(paths["png"]))
    n = len(item.maps)
    h0, w0 = item.image.shape[:2]
    rows, cols = math.ceil((n + 1) / 3), 3
    assert png.shape == (rows * (48 + round((480 - 72) * h0 / w0)), cols * 480, 3) == (*figure_size((h0, w0), n), 3)
    assert png.std() > 20  # a picture, not a blank canvas
    for m in item.maps:
        np.testing.assert_array_equal(np.load(paths[m.name]), m.map)
    with write_stats(items, tmp_path / "stats.csv").open() as f:
        rows_ = list(csv.DictReader(f))
    assert len(rows_) == sum(len(it.maps) for it in items)
    assert {"min", "max", "mean", "entropy_nats", "entropy_norm", "flag"} <= set(rows_[0])


def test_outputs_are_written_atomically(items, tmp_path):
    """A write that fails half-way (here: the last stats row) leaves the previous file as it was and no temporary
    file; a completed save leaves only its PNG and .npy files."""
    path = write_stats(items, tmp_path / "stats.csv")
    before = path.read_bytes()
    m = copy.copy(items[0].maps[0])
    m.stats = {**m.stats, "x": 1.0}  # a field the CSV does not have
    broken = dataclasses.replace(items[0], maps=[*items[0].maps, m])
    with pytest.raises(ValueError, match="fields not in fieldnames"):
        write_stats([broken], path, overwrite=True)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["stats.csv"]
    paths = save(dataclasses.replace(items[0], maps=items[0].maps[:1]), tmp_path / "maps")
    assert sorted(p.name for p in (tmp_path / "maps").iterdir()) == sorted(p.name for p in paths.values())


def test_same_file_name_in_two_folders(checkpoint, tmp_path):
    """a/img.jpg and b/img.jpg write separate outputs, named by their folders, and separate stats rows."""
    from attn_yolo.heatmap.predict import image_names

    for folder, src in (("a", default_sources()[0]), ("b", default_sources()[1])):
        (tmp_path / "in" / folder).mkdir(parents=True)
        cv2.imwrite(str(tmp_path / "in" / folder / "img.jpg"), cv2.resize(read_image(src), (96, 64)))
    out = tmp_path / "out"
    assert (
        main(
            [f"model={checkpoint}", f"source={tmp_path / 'in' / '*' / 'img.jpg'}", "imgsz=64", "layers=6", f"out={out}"]
        )
        == 0
    )
    assert (out / "a_img_heatmaps.png").is_file() and (out / "b_img_heatmaps.png").is_file()
    a, b = np.load(out / "a_img_L06_CBAM_spatial.npy"), np.load(out / "b_img_L06_CBAM_spatial.npy")
    assert not np.array_equal(a, b)  # two images, two maps: neither overwrote the other
    with (out / "stats.csv").open() as f:
        assert [r["image"] for r in csv.DictReader(f)] == ["a/img.jpg"] * 2 + ["b/img.jpg"] * 2
    # the naming rule: unique stems stay; shared ones take their folders, then their suffix; repeats get a count
    files = [
        Path("x/bus.jpg"),
        Path("p/q/img.jpg"),
        Path("p/r/img.jpg"),
        Path("s/im.jpg"),
        Path("s/im.png"),
        Path("s/im.png"),
    ]
    assert image_names(files) == [
        ("bus.jpg", "bus"),
        ("q/img.jpg", "q_img"),
        ("r/img.jpg", "r_img"),
        ("im.jpg", "im_jpg"),
        ("im.png", "im_png"),
        ("im.png (2)", "im_png-2"),
    ]


def test_panel_titles_give_shapes_as_h_by_w(items):
    """Panels name every shape H×W, as the console table and stats.csv do (zidane: 720×1280 image, 128×192 input)."""
    from attn_yolo.heatmap import plot

    item = dataclasses.replace(items[1], maps=items[1].maps[:2])
    titles = [ax.get_title() for ax in plot(item).axes if ax.get_title()]
    h0, w0 = item.image.shape[:2]
    assert h0 < w0 and f"{h0}×{w0} (H×W)" in titles[0] and f"model input {item.input_shape[0]}×" in titles[0]
    for m, t in zip(item.maps, titles[1:]):
        assert m.map.shape[0] != m.map.shape[1] and f"{m.map.shape[0]}×{m.map.shape[1]} (H×W)" in t


def test_panel_titles_lie_inside_the_figure_and_their_panel(items):
    """Every title, the long ones of a flagged map with its |γ| included, lies inside the figure (not clipped at the
    left edge) and is no wider than its panel (not drawn over the next one), measured by matplotlib's renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from attn_yolo.heatmap import plot
    from attn_yolo.heatmap.figure import PANEL_PX

    long = [dataclasses.replace(m, block="C3k2_BiLevelRoutingAttention", gamma=0.3) for m in items[0].maps[:4]]
    for m in long:
        m.stats = {**m.stats, "flag": "uniform"}  # a flagged map: its title carries "[UNIFORM]" too
    item = dataclasses.replace(items[0], maps=long)  # the first column's title starts at the figure's left edge
    fig = plot(item, panel_px=PANEL_PX)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    titles = [ax.title for ax in fig.axes if ax.get_title()]
    assert len(titles) == len(item.maps) + 1
    for t in titles:
        box = t.get_window_extent(canvas.get_renderer())
        assert 0 <= box.x0 and box.x1 <= fig.bbox.width and box.width <= PANEL_PX, (t.get_text(), box)


def test_detection_labels_fit_a_small_image():
    """On a 128-px image the boxes and labels are drawn at display size: they cover a small part of the panel, and
    each box sits where the detection is."""
    from ultralytics.engine.results import Results

    from attn_yolo.heatmap import ImageHeatmaps
    from attn_yolo.heatmap.figure import detections_image

    image = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    boxes = torch.tensor(
        [
            [10, 10, 40, 40, 0.91, 0],
            [60, 12, 110, 50, 0.88, 1],
            [15, 70, 55, 118, 0.77, 2],
            [70, 70, 120, 120, 0.65, 3],
            [40, 40, 80, 80, 0.5, 1],
        ],
        dtype=torch.float32,
    )
    result = Results(image, path="s.jpg", names={0: "circle", 1: "square", 2: "triangle", 3: "cross"}, boxes=boxes)
    item = ImageHeatmaps(Path("s.jpg"), image, (128, 128), result, [])
    size = (400, 400)
    drawn = detections_image(item, size)
    plain = cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)
    changed = np.abs(drawn.astype(int) - plain.astype(int)).max(2) > 40
    assert changed.mean() < 0.25  # drawn at 128 px and enlarged, the labels covered 64 % of it
    _, y1, x2, y2 = (v * 400 / 128 for v in (70, 70, 120, 120))  # the 4th box, scaled to the panel
    assert changed[round((y1 + y2) / 2), round(x2) - 3 : round(x2) + 3].any()  # its right edge
    assert not changed[round((y1 + y2) / 2), round(x2) + 8 : round(x2) + 20].any()  # nothing right of it


def test_gate_table_names_real_gates():
    """Every ``GATE_MAPS`` entry names submodules the block has and a ``GATE_MAP_FNS`` function; every gated block of
    the registry has an entry."""
    from attn_yolo.heatmap.maps import GATE_MAP_FNS, GATE_MAPS, block_gates
    from attn_yolo.registry import MODULES

    for cls, kinds in GATE_MAPS.items():
        found = block_gates(cls(64))
        assert list(found) == list(dict.fromkeys(p for _, *paths in kinds.values() for p in paths))
        marked = {LSKA, MLCA}  # an nn.Identity marks the gate as applied: LSKA's unsquashed A, MLCA's un-pooled mix
        assert all(isinstance(m, nn.Identity if cls in marked else (nn.Sigmoid, nn.Softmax))
                   for m in found.values()), cls  # Softmax: SK's selection
        assert {fn for fn, *_ in kinds.values()} <= set(GATE_MAP_FNS)
    assert block_gates(MHSA(64)) == {}
    assert set(MODULES.values()) - set(GATE_MAPS) == {MHSA, BiLevelRoutingAttention}  # attention, no gates


class TinyNew(nn.Module):
    """The seven newer blocks in a row (stride 1), every parameter random so that every gate varies."""

    def __init__(self, c: int = 16):
        super().__init__()
        torch.manual_seed(0)
        blocks = CoordAtt(c, 4), EMA(c, 4), SimAM(c), GAM(c, 4), ShuffleAttention(c, 2), TripletAttention(c), NAM(c)
        self.model = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), *blocks)
        for b in blocks:
            for p in b.parameters():
                nn.init.normal_(p, 0, 0.5)

    def forward(self, x):
        return self.model(x)


def test_new_block_maps_match_block_outputs():
    """Each map against the block's own forward (``y`` its output, ``x`` its input, norms over channels per location):
    one-gate blocks ``G = ‖y‖₁ / ‖x‖₁``; GAM ``channel · spatial = ‖y‖₁ / ‖x‖₁`` with ``channel`` recomputed from its
    MLP; ShuffleAttention ``channel · ‖x₀‖₁ + spatial · ‖x₁‖₁ = ‖y‖₁`` over the two halves of each group; Triplet
    ``(cw + hc + hw) / 3 = ‖y‖₁ / ‖x‖₁`` and ``hw`` = its (H, W) branch recomputed from the Z-pool."""
    net = TinyNew().eval()
    x = torch.randn(2, 3, 12, 10)
    ins, outs, cap = capture_with_io(net, x)
    expected_kinds = [(1, "coord"), (2, "gain"), (3, "gain"), (4, "channel"), (4, "spatial"), (5, "channel"),
                      (5, "spatial"), (6, "cw"), (6, "hc"), (6, "hw"), (7, "gain")]  # fmt: skip
    assert [(m.layer, m.kind) for m in cap.maps(0)] == expected_kinds
    for b in range(2):
        maps = {(m.layer, m.kind): m.map.astype(np.float64) for m in cap.maps(b)}
        assert all(m.stride == 1 and m.map.shape == (12, 10) for m in cap.maps(b))
        xs, ys = {i: ins[i][b].double() for i in ins}, {i: outs[i][b].double() for i in outs}
        gain = {i: (ys[i].abs().sum(0) / xs[i].abs().sum(0)).numpy() for i in ins}
        for i, kind in ((1, "coord"), (2, "gain"), (3, "gain"), (7, "gain")):  # y = x ⊙ s, one gate
            np.testing.assert_allclose(maps[i, kind], gain[i], rtol=1e-5)
        gam = net.model[4]
        with torch.no_grad():
            y1 = xs[4] * torch.sigmoid(gam.channel(ins[4][b : b + 1])[0].double())
        np.testing.assert_allclose(maps[4, "channel"], (y1.abs().sum(0) / xs[4].abs().sum(0)).numpy(), rtol=1e-5)
        np.testing.assert_allclose(maps[4, "channel"] * maps[4, "spatial"], gain[4], rtol=1e-5)
        sa, a = net.model[5], xs[5].abs()
        c = 16 // (2 * sa.groups)  # channels per half-group: group k holds x₀ = k·2c + [0, c), x₁ = k·2c + [c, 2c)
        half0 = [k * 2 * c + j for k in range(sa.groups) for j in range(c)]
        half1 = [ch for ch in range(16) if ch not in half0]
        np.testing.assert_allclose(
            maps[5, "channel"] * a[half0].sum(0).numpy() + maps[5, "spatial"] * a[half1].sum(0).numpy(),
            ys[5].abs().sum(0).numpy(),
            rtol=1e-5,
        )
        np.testing.assert_allclose((maps[6, "cw"] + maps[6, "hc"] + maps[6, "hw"]) / 3, gain[6], rtol=1e-5)
        tri, xi = net.model[6], ins[6][b : b + 1]
        with torch.no_grad():
            hw = tri.hw(torch.cat((xi.amax(1, keepdim=True), xi.mean(1, keepdim=True)), 1))[0, 0]
        np.testing.assert_allclose(maps[6, "hw"], hw.numpy(), rtol=1e-6)
        for (i, kind), m in maps.items():
            assert 0 <= m.min() and m.max() <= 1 and m.std() > 1e-4, (i, kind)  # gains of gates in [0, 1], not flat


def test_lska_mlca_ela_caa_maps_match_block_outputs():
    """Issue 23's four, each ``y = x ⊙ s`` with one gate: the map is ``‖y‖₁ / ‖x‖₁`` per location (for LSKA's
    unsquashed ``A``, the gain of ``|A|``, which is the same ratio); ELA's is the product ``y^h ⊙ y^w``."""
    torch.manual_seed(0)
    blocks = LSKA(16, 7), MLCA(16, 3), ELA(16, "T"), CAA(16, 5, 5)
    for b in blocks:
        for p in b.parameters():
            nn.init.normal_(p, 0, 0.5)
    net = type("Net", (nn.Module,), {"forward": lambda self, x: self.model(x)})()  # layers under .model, as Tiny
    net.model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), *blocks)
    net.eval()
    ins, outs, cap = capture_with_io(net, torch.randn(2, 3, 12, 10))
    assert [(m.layer, m.block, m.kind) for m in cap.maps(0)] == [(1, "LSKA", "gain"), (2, "MLCA", "gain"),
                                                              (3, "ELA", "coord"), (4, "CAA", "gain")]
    for b in range(2):
        for m in cap.maps(b):
            x, y = ins[m.layer][b].double(), outs[m.layer][b].double()
            np.testing.assert_allclose(m.map, (y.abs().sum(0) / x.abs().sum(0)).numpy(), rtol=1e-5)
            assert m.map.min() >= 0 and m.map.std() > 1e-4 and m.map.shape == (12, 10)
            assert m.block == "LSKA" or m.map.max() <= 1  # gates in [0, 1]; LSKA's |A| is unbounded


def test_sk_map_is_the_large_kernel_share():
    """SKAttention's ``large`` map against its selection recomputed from the paper (Eqs. 3-5, softmax over the two
    branches): ``G = Σ_c a_5×5,c |x_c| / Σ_c |x_c|``; within ``[min a, max a]`` and not flat on random weights."""
    torch.manual_seed(0)
    block = SKAttention(16, groups=4, L=8)
    for p in block.parameters():
        nn.init.normal_(p, 0, 0.5)
    net = TinyNew.__new__(TinyNew)  # TinyNew's forward over ``self.model``, here a conv and the SK block
    nn.Module.__init__(net)
    net.model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), block)
    net.eval()
    x = torch.randn(2, 3, 12, 10)
    ins, _, cap = capture_with_io(net, x)
    maps = cap.maps(1)
    assert [(m.layer, m.block, m.kind) for m in maps] == [(1, "SKAttention", "large")]
    xi = ins[1][1].double()
    with torch.no_grad():
        u = [br(ins[1][1:2])[0].double() for br in block.branches.convs]
        s = (u[0] + u[1]).mean((1, 2))
        z = block.fuse(s.float().view(1, 16, 1, 1)).double().view(-1)
        logits = (block.fc.weight[:, :, 0, 0].double() @ z).view(2, 16)
    a = torch.softmax(logits, 0)[1]  # the 5×5 (3×3 dilated 2) branch
    ref = (a[:, None, None] * xi.abs()).sum(0) / xi.abs().sum(0)
    np.testing.assert_allclose(maps[0].map, ref.numpy(), rtol=1e-5)
    assert a.min() - 1e-6 <= maps[0].map.min() and maps[0].map.max() <= a.max() + 1e-6
    assert maps[0].map.std() > 1e-3


def test_map_stats_expose_collapsed_maps():
    u = map_stats(np.full((4, 5), 0.5, np.float32))
    assert (
        u["flag"] == "uniform"
        and u["entropy_norm"] == pytest.approx(1.0)
        and u["entropy_nats"] == pytest.approx(math.log(20))
    )
    one = np.zeros((4, 5), np.float32)
    one[1, 2] = 0.9
    o = map_stats(one)
    assert o["flag"] == "one-hot" and o["entropy_nats"] == pytest.approx(0.0) and o["peak_share"] == 1.0
    half = map_stats(np.array([[1.0, 1.0, 0.0, 0.0]]))
    assert half["entropy_nats"] == pytest.approx(math.log(2)) and half["entropy_norm"] == pytest.approx(0.5)
    assert half["flag"] == "one-hot" and map_stats(np.array([[1.0, 1.0, 1.0, 0.0]]))["flag"] == ""


# ------------------------------------------------------------------------------------------------------ bad input --
def test_unreadable_and_missing_images(checkpoint, tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not a jpeg")
    with pytest.raises(HeatmapError, match="broken.jpg"):
        heatmaps(checkpoint, bad)
    with pytest.raises(HeatmapError, match="nope.jpg"):
        heatmaps(checkpoint, tmp_path / "nope.jpg")
    with pytest.raises(HeatmapError, match="matches no file"):
        heatmaps(checkpoint, str(tmp_path / "*.png"))


def test_query_points_outside_the_image_are_refused_before_any_work(checkpoint, monkeypatch):
    """bus.jpg is 1080×810 (H×W): a point at y = -3 or x = 810 is refused, naming the point and the size; nothing
    is predicted first."""
    import attn_yolo.heatmap.predict as C

    monkeypatch.setattr(C, "predict_with_maps", lambda *a, **k: pytest.fail("predicted before checking query"))
    bus = default_sources()[0]
    with pytest.raises(HeatmapError, match=r"point \(500, -3\) lies outside image .*bus.jpg', which is 1080×810"):
        heatmaps(checkpoint, bus, query="500,-3")
    with pytest.raises(HeatmapError, match=r"allowed: 0 <= x < 810, 0 <= y < 1080"):
        heatmaps(checkpoint, bus, query=[(810, 10)])


def test_layer_that_is_not_an_attention_block(model):
    listing = r"5 \(SE\), 6 \(CBAM\), 9 \(ECA\), 10 \(SAM\), 15 \(MHSA\)"
    with pytest.raises(HeatmapError, match=r"layers=3: layer 3 is Conv, not an attention block.*" + listing):
        AttentionCapture(model, layers=3)
    with pytest.raises(HeatmapError, match="no layer 99"):
        AttentionCapture(model, layers="5,99")
    with pytest.raises(HeatmapError, match="expected 'all'"):
        AttentionCapture(model, layers="five")


def test_model_without_attention_blocks(tmp_path):
    from ultralytics import YOLO

    plain = YOLO("yolo11n.yaml")
    src = default_sources()[0]
    with pytest.raises(
        NoAttentionError,
        match=r"no attention blocks \(SE, ECA, SAM, CBAM, MHSA, CoordAtt, EMA, SimAM, GAM, ShuffleAttention, "
        r"TripletAttention, NAM, LSKA, MLCA, ELA, CAA, SKAttention, BiLevelRoutingAttention\).*cam=eigencam",
    ):
        heatmaps(plain, src, imgsz=128)
    plain.save(str(tmp_path / "plain.pt"))
    with pytest.raises(UsageError, match="no attention blocks"):
        main([f"model={tmp_path / 'plain.pt'}", f"source={src}", "imgsz=128", f"out={tmp_path}"])
    if importlib.util.find_spec("pytorch_grad_cam"):  # a CAM needs no attention block
        (it,) = heatmaps(plain.model, src, imgsz=128, cam="eigencam")
        assert [(m.block, m.kind) for m in it.maps] == [("EigenCAM", "cam")]


def test_cli(checkpoint, tmp_path, capsys):
    import attn_yolo_console as cli

    assert main(["help"]) == 0 and "layers=all" in capsys.readouterr().out
    assert cli.main(["heatmap", f"model={checkpoint}", "layers=3"]) == 2
    assert "layer 3 is Conv" in capsys.readouterr().err
    with pytest.raises(UsageError, match=r"layer: unknown key \(did you mean 'layers'\?\)"):
        main([f"model={checkpoint}", "layer=5"])
    with pytest.raises(UsageError, match="model= is required"):
        main([])
    with pytest.raises(UsageError, match="no such file"):
        main(["model=missing.pt"])
    src = default_sources()[0]
    assert main([f"model={checkpoint}", f"source={src}", "imgsz=128", "layers=6", f"out={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "L06_CBAM_spatial" in out and "bus_heatmaps.png" in out
    assert (tmp_path / "bus_heatmaps.png").is_file() and (tmp_path / "bus_L06_CBAM_channel.npy").is_file()
    assert (tmp_path / "stats.csv").is_file()


# ------------------------------------------------------------------------------------------------------------ CAM --
def test_eigencam_and_gradcam(model):
    pytest.importorskip("pytorch_grad_cam")
    from attn_yolo.heatmap import class_activation_map

    image = read_image(default_sources()[1])
    x = letterboxed(image, 128)
    flags = [p.requires_grad for p in model.parameters()]
    with torch.inference_mode():  # as YOLO.predict runs: leaves inference tensors in Detect's anchor cache
        model(x)
    for method in ("eigencam", "gradcam"):
        cam = class_activation_map(model, image, method, imgsz=128)
        assert (cam.block, cam.kind, cam.stride) == ({"eigencam": "EigenCAM", "gradcam": "GradCAM"}[method], "cam", 8)
        assert cam.map.shape == (x.shape[2] // 8, x.shape[3] // 8) and np.isfinite(cam.map).all()
        assert 0 <= cam.map.min() and cam.map.max() <= 1 + 1e-6 and cam.map.std() > 0
        assert no_hooks(model)
    assert all(p.grad is None for p in model.parameters())
    assert [p.requires_grad for p in model.parameters()] == flags


# ----------------------------------------------------------------------------------------------- trained (slow) --
@pytest.mark.slow
def test_maps_of_a_trained_model(all_blocks_yaml, tmp_path):
    """Train on the synthetic dataset (about 10 CPU minutes), then heatmaps of its validation images.

    A short from-scratch run learns little, so this asserts what holds for any trained model (maps finite, in range,
    not constant, PNG readable) and records the collapse flags rather than requiring them to be empty.
    """
    from ultralytics import YOLO

    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "data", n_train=256, n_val=8, imgsz=160)
    yolo = YOLO(str(all_blocks_yaml))
    yolo.train(
        data=str(data),
        epochs=4,
        imgsz=160,
        batch=8,
        nbs=8,
        optimizer="AdamW",
        lr0=0.002,
        warmup_epochs=0.5,
        workers=0,
        device="cpu",
        plots=False,
        amp=False,
        seed=0,
        project=str(tmp_path / "runs"),
        name="t",
        verbose=False,
    )
    best = tmp_path / "runs" / "t" / "weights" / "best.pt"
    items = heatmaps(best, tmp_path / "data" / "images" / "val", imgsz=160, query="det", conf=0.1)
    assert len(items) == 8
    for it in items:
        assert len([m for m in it.maps if not m.kind.startswith("query")]) == 6
        for m in it.maps:
            assert np.isfinite(m.map).all() and 0 <= m.map.min() and m.map.max() <= 1, (it.path.name, m.name)
            assert m.map.std() > 0, (it.path.name, m.name, m.stats)  # not constant
        png = cv2.imread(str(save(it, tmp_path / "out")["png"]))
        assert png.shape[:2] == figure_size(it.image.shape, len(it.maps))
