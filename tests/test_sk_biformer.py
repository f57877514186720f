"""SKAttention and BiLevelRoutingAttention against float64 references written from their papers (not from the blocks'
code): the SK convolution's split / fuse / select, and bi-level routing with an explicit softmax over the routed
regions' real tokens; plus any input size, gradcheck, autocast, every yolo11 scale and YAML reading."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import bn, x64
from conftest import randomized as _randomized
from ultralytics.nn import tasks
from ultralytics.nn.tasks import DetectionModel

import attn_yolo
from attn_yolo import AttnBuildError
from attn_yolo.insertion import insert_dict
from attn_yolo.nn.biformer import BiLevelRoutingAttention, region_grid
from attn_yolo.nn.sk import SKAttention
from attn_yolo.registry import ALIASES


def randomized(m, seed: int = 0, std: float = 0.5):
    """``conftest.randomized`` with this file's weight scale (0.5)."""
    return _randomized(m, seed, std)


TOL = {"atol": 1e-6, "rtol": 0}
NEW = ["SKAttention", "BiLevelRoutingAttention"]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: the references run many small ops, which 2 threads on shared cores only slow down."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def total(out) -> torch.Tensor:
    """Sum of every tensor in a (nested) model output."""
    if isinstance(out, torch.Tensor):
        return out.float().sum()
    return sum(total(o) for o in (out.values() if isinstance(out, dict) else out))


# ------------------------------------------------------------------------------------------------------ SKAttention
def grouped_conv(x: torch.Tensor, w: torch.Tensor, groups: int, dilation: int) -> torch.Tensor:
    """A grouped convolution written as G dense convolutions on the channel slices (stride 1, 'same' padding)."""
    c, cg = x.shape[1], x.shape[1] // groups
    k = w.shape[-1]
    pad = dilation * (k - 1) // 2
    return torch.cat([F.conv2d(x[:, g * cg : (g + 1) * cg], w[g * cg : (g + 1) * cg], padding=pad, dilation=dilation)
                      for g in range(groups)], 1)[:, :c]


def sk_reference(m: SKAttention, x: torch.Tensor, train: bool, dilated: bool) -> torch.Tensor:
    """Eqs. 1-6 of Li et al. 2019 with the block's weights: U_i = δ(B(conv_i(x))); s = GAP(Σ U_i);
    z = δ(B(W_s s)); a_i = exp(A_i z) / Σ_j exp(A_j z); V = Σ a_i U_i."""
    us = []
    for k, branch in zip(sorted(m.kernels), m.branches.convs):
        conv, norm = branch[0], branch[1]
        w = conv.weight
        if dilated and k >= 5:  # the paper's 5×5 as a 3×3 with dilation 2 (7×7: dilation 3)
            assert w.shape[-1] == 3
            d = (k - 1) // 2
        else:
            assert w.shape[-1] == k
            d = 1
        assert d * (w.shape[-1] - 1) + 1 == k  # the receptive field is k×k
        us.append(torch.relu(bn(grouped_conv(x, w, m.groups, d), norm, train)))
    s = sum(us).mean((2, 3))  # (B, C)
    ws = m.fuse[0].weight[:, :, 0, 0]  # (d, C)
    z = torch.relu(bn(s @ ws.T, m.fuse[1], train))  # (B, d)
    a_all = m.fc.weight[:, :, 0, 0]  # (M·C, d): A_1 ... A_M stacked
    c = x.shape[1]
    logits = torch.stack([z @ a_all[i * c : (i + 1) * c].T for i in range(len(us))], 0)  # (M, B, C)
    a = torch.exp(logits) / torch.exp(logits).sum(0, keepdim=True)
    return sum(a[i][:, :, None, None] * us[i] for i in range(len(us)))


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize(
    "kw", [{}, {"kernels": [1, 3, 5, 7], "groups": 4, "r": 4, "L": 8}, {"kernels": [5, 3], "dilated": False}],
    ids=["paper", "four-branches", "dense-5x5"],
)
def test_sk_equals_paper(kw, train):
    m = randomized(SKAttention(64, **kw)).train(train)
    x = x64(2, 64, 5, 7)
    seen = {}
    m.select.register_forward_hook(lambda mod, i, o: seen.update(a=o))
    y = m(x)
    torch.testing.assert_close(y, sk_reference(m, x, train, kw.get("dilated", True)), **TOL)
    n = len(kw.get("kernels", [3, 5]))
    assert seen["a"].shape == (2, n, 64, 1, 1)
    torch.testing.assert_close(seen["a"].sum(1), torch.ones(2, 64, 1, 1, dtype=torch.float64), **TOL)  # Σ_i a_i = 1


def test_sk_paper_defaults_and_fuse_width():
    m = SKAttention(128)
    assert (m.kernels, m.groups, m.r, m.L, m.d) == ((3, 5), 32, 16, 32, 32)  # d = max(128 / 16, 32)
    assert SKAttention(1024).d == 64 and SKAttention(40).groups == 20 and SKAttention(3).groups == 3
    conv5 = m.branches.convs[1][0]
    assert conv5.kernel_size == (3, 3) and conv5.dilation == (2, 2) and conv5.groups == 32 and conv5.bias is None
    assert m.fc.bias is None and m.fuse[0].bias is None  # the paper's and the authors' fuse/select have no bias


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"kernels": [3]}, r"SKAttention: kernels=\[3\] is invalid; allowed: a list of 2..4 distinct odd ints"),
        ({"kernels": [3, 4]}, r"kernels=\[3, 4\] is invalid"),
        ({"kernels": [3, 3]}, r"kernels=\[3, 3\] is invalid"),
        ({"kernels": [3, 13]}, r"kernels=\[3, 13\] is invalid"),
        ({"kernels": 16}, r"kernels=16 is invalid"),
        ({"r": 0}, r"SKAttention: r=0 is invalid; allowed: an int >= 1"),
        ({"groups": 5}, r"SKAttention: groups=5 is invalid; allowed: \[1, 2, 4, 8, 16, 32, 64\]"),
        ({"L": 0}, r"SKAttention: L=0 is invalid"),
        ({"dilated": 1}, r"SKAttention: dilated=1 is invalid; allowed: true or false"),
    ],
)
def test_sk_bad_hyperparameters(kw, match):
    with pytest.raises(AttnBuildError, match=match):
        SKAttention(64, **kw)


# ---------------------------------------------------------------------------------------- BiLevelRoutingAttention
def bra_reference(m: BiLevelRoutingAttention, x: torch.Tensor) -> torch.Tensor:
    """Bi-level routing written out token by token (Zhu et al. 2023, Sec. 3.2), explicit softmax, float64.

    Regions: rows ``[i·s_h, (i+1)·s_h)`` × columns ``[j·s_w, (j+1)·s_w)`` clipped to the map, ``s = ceil(H / n_win)``;
    region-level q, k: means over the region's tokens; each region routes to the top-k regions by ``q^r · k^r``; each
    query attends every token of those regions with ``softmax(q·k / √C)`` per head (head = a slice of C/h channels);
    then LCE (depthwise conv on V) is added and the output projection applied."""
    b, c, h, w = x.shape
    qkv = F.conv2d(x, m.qkv.weight, m.qkv.bias)
    q, k, v = qkv[:, :c], qkv[:, c : 2 * c], qkv[:, 2 * c :]
    sh, sw = math.ceil(h / m.n_win), math.ceil(w / m.n_win)
    nh, nw = math.ceil(h / sh), math.ceil(w / sw)
    region = ((torch.arange(h) // sh)[:, None] * nw + (torch.arange(w) // sw)[None, :]).flatten()  # (N,) row-major
    assert set(region.tolist()) == set(range(nh * nw))  # no empty region
    topk = min(m.topk, nh * nw)
    d = c // m.heads
    qt, kt, vt = (t.flatten(2).transpose(1, 2).reshape(b, h * w, m.heads, d) for t in (q, k, v))  # (B, N, h, d)
    members = [torch.nonzero(region == r)[:, 0] for r in range(nh * nw)]  # token indices of each region
    out = torch.zeros_like(qt)
    for bi in range(b):
        qr = torch.stack([qt[bi, i].mean(0) for i in members]).flatten(1)  # (R, C): means of real tokens
        kr = torch.stack([kt[bi, i].mean(0) for i in members]).flatten(1)
        routed = torch.topk(qr @ kr.T, topk, dim=1).indices  # (R, topk)
        for r, queries in enumerate(members):
            keys = torch.cat([members[j] for j in routed[r].tolist()])  # every real token of the routed regions
            logits = torch.einsum("qhd,khd->hqk", qt[bi, queries], kt[bi, keys]) / math.sqrt(c)  # √C: full width
            a = torch.exp(logits - logits.amax(-1, keepdim=True))
            a = a / a.sum(-1, keepdim=True)  # explicit softmax over the keys, per head
            out[bi, queries] = torch.einsum("hqk,khd->qhd", a, vt[bi, keys])
    out = out.reshape(b, h * w, c)
    out = out.transpose(1, 2).reshape(b, c, h, w)
    if m.lepe is not None:
        out = out + F.conv2d(v, m.lepe.weight, m.lepe.bias, padding=m.side_dwconv // 2, groups=c)
    return F.conv2d(out, m.proj.weight, m.proj.bias)


@pytest.mark.parametrize(
    "c, heads, hw, kw",
    [
        (16, 2, (8, 8), {}),  # s = 2: 4×4 regions, no padding
        (16, 2, (9, 11), {}),  # s = (2, 2): 5×6 regions, padded bottom and right
        (8, 1, (5, 7), {"n_win": 2, "topk": 3}),
        (32, 4, (3, 2), {"topk": 9}),  # topk above the region count: every region
        (8, 1, (1, 1), {}),
        (16, 2, (6, 13), {"side_dwconv": 0, "n_win": 3, "topk": 1}),
    ],
)
def test_bra_equals_explicit_softmax_over_routed_regions(c, heads, hw, kw):
    m = randomized(BiLevelRoutingAttention(c, heads=heads, **kw))
    x = x64(2, c, *hw)
    torch.testing.assert_close(m(x), bra_reference(m, x), **TOL)


@pytest.mark.parametrize(
    "hw",
    [(80, 80), (60, 100), (40, 40), (30, 50), (20, 20), (15, 25)],
    ids=["P3@640", "P3@480x800", "P4@640", "P4@480x800", "P5@640", "P5@480x800"],
)
def test_bra_detector_feature_sizes(hw):
    """The P3/P4/P5 maps of 640×640 and 480×800 inputs (strides 8/16/32): 7×7 regions, padded where needed, output
    equal to the explicit form (float64)."""
    m = randomized(BiLevelRoutingAttention(16, heads=2), std=0.3)
    x = x64(1, 16, *hw)
    nh, nw, sh, sw = region_grid(*hw, 7)
    assert (sh, sw) == (math.ceil(hw[0] / 7), math.ceil(hw[1] / 7))
    assert nh <= 7 and nw <= 7 and nh * sh >= hw[0] > (nh - 1) * sh and nw * sw >= hw[1] > (nw - 1) * sw
    assert (nh, nw) == {(30, 50): (6, 7), (15, 25): (5, 7)}.get(hw, (7, 7))  # 30 rows: 6 regions of 5 suffice
    torch.testing.assert_close(m(x), bra_reference(m, x), **TOL)


def test_bra_routing_uses_region_means():
    """The routing of region i is the top-k of ``mean_i(q) · mean_j(k)`` over j (checked against the reference's
    own regions at a padded size)."""
    m = randomized(BiLevelRoutingAttention(8, heads=1, n_win=3, topk=2))
    x = x64(2, 8, 7, 8)  # s = (3, 3): 3×3 regions, padded to 9×9
    qkv = F.conv2d(x, m.qkv.weight, m.qkv.bias)
    q, k = qkv[:, :8], qkv[:, 8:16]
    means = lambda t: torch.stack([t[:, :, i * 3 : i * 3 + 3, j * 3 : j * 3 + 3].mean((2, 3))  # noqa: E731
                                   for i in range(3) for j in range(3)], 1)
    ref = torch.topk(means(q) @ means(k).transpose(1, 2), 2, dim=-1).indices
    assert torch.equal(m.routes(x), ref)


def test_bra_ties_go_to_the_lower_region_index():
    """Regions with equal means (a constant letterbox border) tie in the affinity: the lower row-major index wins, as
    in ONNX TopK, so PyTorch and onnxruntime route alike; torch.topk alone breaks ties arbitrarily."""
    m = BiLevelRoutingAttention(8, heads=1, n_win=4, topk=3).eval()
    x = torch.full((2, 8, 8, 8), 0.5)
    assert torch.equal(m.routes(x), torch.tensor([0, 1, 2]).expand(2, 16, 3))


def test_bra_region_means_of_equal_tokens_are_exact_in_float32():
    """``region_mean`` of a region of equal tokens is that token bit for bit in float32 (a plain sum of 6 or 9 equal
    values rounds differently, so a padded border region would lose or win its tie by the region's size)."""
    from attn_yolo.nn.biformer import region_mean

    v = torch.tensor(0.1, dtype=torch.float32)
    t = torch.full((1, 2, 9, 3), 0.1)
    valid = torch.tensor([[1.0] * 9, [1.0] * 6 + [0.0] * 3])
    t[:, 1, 6:] = 0  # padding
    got = region_mean(t, valid)
    assert torch.equal(got, torch.full((1, 2, 3), v.item()))
    assert (t[:, 1, :6].sum(1) / 6 != v).any() or (t[:, 0].sum(1) / 9 != v).any()  # the plain mean is not exact
    x = torch.randn(2, 3, 9, 4, dtype=torch.float64)
    assert torch.allclose(region_mean(x, None), x.mean(2), atol=1e-12)


def test_bra_letterbox_border_routes_alike_in_onnxruntime_and_openvino(tmp_path):
    """A constant border over padded regions at a size other than the traced one (a dynamic export): onnxruntime and
    OpenVINO's CPU plugin (which runs the float64 routing in float32) route as PyTorch, outputs within 1e-5."""
    ort = pytest.importorskip("onnxruntime")
    ov = pytest.importorskip("openvino")
    torch.manual_seed(0)
    m = BiLevelRoutingAttention(32).eval()
    x = torch.randn(1, 32, 16, 16)
    x[..., 10:, :] = 0.5
    x[..., :, 10:] = 0.5
    f = tmp_path / "bra.onnx"
    torch.onnx.export(m, torch.randn(1, 32, 14, 14), str(f), opset_version=17, dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {2: "h", 3: "w"}})
    with torch.no_grad():
        ref = m(x).numpy()
    sess = ort.InferenceSession(str(f), providers=["CPUExecutionProvider"])
    compiled = ov.Core().compile_model(str(f), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    assert abs(sess.run(None, {"x": x.numpy()})[0] - ref).max() < 1e-5
    assert abs(compiled(x.numpy())[0] - ref).max() < 1e-5


def test_bra_defaults_and_heads():
    m = BiLevelRoutingAttention(256)
    assert (m.heads, m.n_win, m.topk, m.side_dwconv, m.lepe.kernel_size) == (8, 7, 4, 5, (5, 5))  # head width 32
    assert [BiLevelRoutingAttention(c).heads for c in (3, 16, 24, 64, 128, 768)] == [1, 1, 1, 2, 4, 24]
    assert m.qk_scale == 256**-0.5


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"heads": 3}, r"BiLevelRoutingAttention: heads=3 is invalid; allowed: a divisor of C=64 \(head width >= 8\)"),
        ({"heads": 16}, r"heads=16 is invalid"),  # head width 4
        ({"n_win": 0}, r"n_win=0 is invalid; allowed: an int in 1..32"),
        ({"n_win": 7.0}, r"n_win=7.0 is invalid"),
        ({"topk": 50}, r"topk=50 is invalid; allowed: an int in 1..n_win²=49"),
        ({"topk": 0}, r"topk=0 is invalid"),
        ({"side_dwconv": 4}, r"side_dwconv=4 is invalid; allowed: 0 \(no LCE\) or an odd int in 1..11"),
    ],
)
def test_bra_bad_hyperparameters(kw, match):
    with pytest.raises(AttnBuildError, match=match):
        BiLevelRoutingAttention(64, **kw)


# ---------------------------------------------------------------------------------------------------------- shared
@pytest.mark.parametrize(
    "make",
    [lambda: SKAttention(8, groups=2, L=4).train(), lambda: BiLevelRoutingAttention(8, heads=1, n_win=2, topk=2)],
    ids=NEW,
)
def test_gradcheck_float64(make):
    torch.manual_seed(0)
    m = make().double()
    x = torch.randn(2, 8, 5, 7, dtype=torch.float64, requires_grad=True)  # BRA: padded to 6×8
    assert torch.autograd.gradcheck(m, (x,), eps=1e-6, atol=1e-4, fast_mode=True)


AUTOCAST_TOL = {  # (block, dtype, input scale) → max relative L2 error vs fp32
    ("SKAttention", torch.float16): 5e-3,
    ("SKAttention", torch.bfloat16): 3e-2,
    ("BiLevelRoutingAttention", torch.float16): 5e-3,
    ("BiLevelRoutingAttention", torch.bfloat16): 3e-2,
}
"""At scale 1. At ×300, SK's BatchNorms absorb the scale (same tolerances); BRA has no normalisation, so its logits
grow as 300² and the softmax saturates: rounding q and k to 8 (bf16) or 11 (fp16) mantissa bits moves logits of ~1e4 by
units and changes which key wins. Any attention without a norm does that; there the check is finiteness plus a loose
bound (``SATURATED``) that still fails a block returning zeros or garbage (relative error 1 or more)."""
SATURATED = {torch.float16: 0.1, torch.bfloat16: 0.4}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("scale", [1, 300])
def test_autocast_finite_and_close_to_fp32(name, dtype, scale):
    torch.manual_seed(0)
    m = attn_yolo.MODULES[name](64).eval()
    x = torch.randn(2, 64, 20, 20) * scale
    with torch.no_grad():
        ref = m(x)
        with torch.autocast("cpu", dtype=dtype):
            y = m(x)
    assert torch.isfinite(y).all()
    err = float((y.float() - ref).norm() / ref.norm())
    tol = SATURATED[dtype] if name == "BiLevelRoutingAttention" and scale == 300 else AUTOCAST_TOL[name, dtype]
    assert err < tol, err


@pytest.mark.parametrize("base", ["yolo11n", "yolo11s", "yolo11m", "yolo11l", "yolo11x"])
def test_every_yolo11_scale_square_and_rectangular(base):
    """Both blocks after each backbone output (P3/P4/P5) of every yolo11 scale (widths 128 to 768): training forward and
    backward on a rectangular batch, eval forward square and rectangular (the larger scales run the parsed layers
    directly: DetectionModel's own 256×256 stride pass would cost more than the test)."""
    d = insert_dict(f"{base}.yaml", NEW, at="backbone", check=False)
    if base == "yolo11n":
        model = DetectionModel(d, verbose=False)
        layers, save = model.model, model.save
    else:
        layers, save = tasks.parse_model(d, 3, verbose=False)
    blocks = [m for m in layers if type(m) in attn_yolo.MODULES.values()]
    assert [type(m).__name__ for m in blocks] == NEW * 3
    widths = {"yolo11n": [128, 128, 256], "yolo11s": [256, 256, 512], "yolo11m": [512] * 3, "yolo11l": [512] * 3,
              "yolo11x": [768] * 3}[base]
    assert [m.c1 for m in blocks] == [c for c in widths for _ in NEW]

    def run(x):
        y = []
        for m in layers:  # DetectionModel._predict_once
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in save else None)
        return x

    layers.train()
    out = run(torch.rand(2, 3, 64, 96))
    total(out).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for b in blocks for p in b.parameters())
    layers.eval()
    with torch.no_grad():
        for shape in [(1, 3, 64, 64), (1, 3, 96, 64)]:
            assert run(torch.rand(shape))[0].shape[:2] == (1, 84)


@pytest.mark.parametrize(
    "row, expect",
    [
        (["SKAttention", [1024, [3, 5, 7], 16]], {"kernels": (3, 5, 7), "r": 16}),  # External-Attention order
        (["SK", []], {"kernels": (3, 5), "r": 16}),
        (["SKNet", [[1, 3]]], {"kernels": (1, 3)}),
        (["BiLevelRoutingAttention", [8, 7]], {"heads": 8, "n_win": 7}),  # the authors' (dim, num_heads, n_win)
        (["BiFormer", [1024, 8, 7]], {"heads": 8}),  # [1024, 8]: also n_win=8 in bra_legacy's order (refused)
        (["BRA", []], {"heads": 8, "topk": 4}),
        (["BiLevelRoutingAttention_nchw", [4, 5, 2]], {"heads": 4, "n_win": 5, "topk": 2}),
    ],
)
def test_yaml_rows_and_aliases(row, expect):
    d = insert_dict("yolo11n.yaml", ["SE"], at=[10], check=False)  # a 256-channel P5 row to replace
    i = next(j for j, r in enumerate(d["backbone"]) if r[2] == "SE")
    d["backbone"][i] = [-1, 1, *row]
    layers, _ = tasks.parse_model(d, 3, verbose=False)
    block = next(m for m in layers if type(m) in attn_yolo.MODULES.values())
    assert block.c1 == 256
    assert {k: getattr(block, k) for k in expect} == expect


def test_aliases_and_not_provided():
    assert {a: ALIASES[a] for a in ("SK", "SKNet", "SKConv")} == dict.fromkeys(("SK", "SKNet", "SKConv"), "SKAttention")
    names = ("BiFormer", "BRA", "BiLevelRoutingAttention_nchw")
    assert {a: ALIASES[a] for a in names} == dict.fromkeys(names, "BiLevelRoutingAttention")
    from attn_yolo.registry import NOT_PROVIDED

    assert not {*NEW, *ALIASES} & set(NOT_PROVIDED)
