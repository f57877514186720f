"""The blocks against their papers: shapes, ECA's kernel formula, CBAM's two poolings, gradients, MHSA vs explicit
softmax, attention dropout, autocast against fp32."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

import attn_yolo
from attn_yolo import CBAM, ECA, MHSA, SAM, SE, AttnBuildError
from attn_yolo.nn import (
    CAA,
    ELA,
    EMA,
    GAM,
    LSKA,
    MLCA,
    NAM,
    BiLevelRoutingAttention,
    CoordAtt,
    ShuffleAttention,
    SimAM,
    SKAttention,
    TripletAttention,
)
from attn_yolo.nn.eca import eca_kernel_size


@pytest.mark.parametrize("name", list(attn_yolo.MODULES))
@pytest.mark.parametrize("c", [3, 16, 24, 256])
def test_shape_preserved(name, c):
    kw = {"heads": 1} if name == "MHSA" and c < 32 else {"r": 2} if name in ("SE", "CBAM") and c < 16 else {}
    kw = {"rate": 1} if name == "GAM" and c < 4 else kw
    if name == "ShuffleAttention" and c % 2:  # each group is halved: the one width it refuses
        with pytest.raises(AttnBuildError, match=f"input channels C={c} is invalid; allowed: an even number"):
            attn_yolo.MODULES[name](c)
        return
    m = attn_yolo.MODULES[name](c, **kw)
    x = torch.randn(2, c, 7, 11)
    assert m(x).shape == x.shape


def test_every_block_is_exported():
    """``from attn_yolo import <block>`` works for every block of MODULES (``__all__`` is not a stale subset)."""
    assert set(attn_yolo.MODULES) <= set(attn_yolo.__all__)
    assert all(getattr(attn_yolo, name) is cls for name, cls in attn_yolo.MODULES.items())
    namespace = {}
    exec("from attn_yolo import *", namespace)
    assert all(namespace[name] is cls for name, cls in attn_yolo.MODULES.items())


def test_block_lists_in_product_text_are_not_stale_subsets():
    """The package description and the tool docstrings that speak of "the blocks" name all of MODULES or none."""
    import re
    from pathlib import Path

    import attn_yolo.heatmap
    import attn_yolo.insertion

    root = Path(__file__).resolve().parents[1]
    description = re.search(r'^description = "(.*)"$', (root / "pyproject.toml").read_text(), re.M).group(1)
    texts = {"pyproject description": description,
             "attn_yolo": attn_yolo.__doc__, "attn_yolo.insertion": attn_yolo.insertion.__doc__,
             "attn_yolo.heatmap": attn_yolo.heatmap.__doc__}
    for where, text in texts.items():
        named = {n for n in attn_yolo.MODULES if re.search(rf"(?<![\w.]){n}(?!\w)", text)}
        assert len(named) <= 1 or named == set(attn_yolo.MODULES), (where, sorted(named))


def test_module_table():
    assert attn_yolo.MODULES == {"SE": SE, "ECA": ECA, "SAM": SAM, "CBAM": CBAM, "MHSA": MHSA, "CoordAtt": CoordAtt,
                                 "EMA": EMA, "SimAM": SimAM, "GAM": GAM, "ShuffleAttention": ShuffleAttention,
                                 "TripletAttention": TripletAttention, "NAM": NAM, "LSKA": LSKA, "MLCA": MLCA,
                                 "ELA": ELA, "CAA": CAA, "SKAttention": SKAttention,
                                 "BiLevelRoutingAttention": BiLevelRoutingAttention}
    assert all(cls.__module__ == f"attn_yolo.nn.{cls.__module__.split('.')[-1]}" for cls in attn_yolo.MODULES.values())


@pytest.mark.parametrize("c", [16, 32, 64, 128, 256, 512, 1024])
def test_eca_kernel_formula(c):
    """k = |(log2 C + b)/γ|_odd (γ=2, b=1): nearest odd number, ties up, as the authors' code does."""
    t = abs((math.log2(c) + 1) / 2)
    odd = min(range(1, 64, 2), key=lambda k: (abs(k - t), -k))  # nearest odd, ties to the larger
    authors = int(t) if int(t) % 2 else int(t) + 1  # ECA-Net reference code
    assert eca_kernel_size(c) == odd == authors
    assert ECA(c).k == odd and ECA(c).conv.kernel_size == (odd,)


def test_eca_kernel_odd_for_every_c():
    assert all(eca_kernel_size(c) % 2 == 1 for c in range(1, 5000))


def test_eca_equals_conv1d_over_channels():
    m = ECA(64, k=5)
    x = torch.randn(2, 64, 5, 6)
    y = x.mean((2, 3))  # (B, C)
    w = m.conv.weight.view(5)
    ref = torch.stack([(F.pad(y, (2, 2))[:, c : c + 5] * w).sum(1) for c in range(64)], 1)
    torch.testing.assert_close(m(x), x * torch.sigmoid(ref)[..., None, None])


def test_se_equals_paper_formula_hidden_width_c_over_r():
    m = SE(64, r=16)
    assert m.hidden == 4  # C // r as in the paper, never clamped
    assert SE(256).hidden == 16 and SE(4, r=4).hidden == 1 and CBAM(48, r=16).channel.hidden == 3
    x = torch.randn(2, 64, 5, 6)
    z = x.mean((2, 3))
    w1, b1 = m.fc1.weight.flatten(1), m.fc1.bias
    w2, b2 = m.fc2.weight.flatten(1), m.fc2.bias
    s = torch.sigmoid(F.relu(z @ w1.T + b1) @ w2.T + b2)
    torch.testing.assert_close(m(x), x * s[..., None, None])


def _cbam_reference(m, x, pools=("avg", "max")):
    def mlp(z):
        l1, _, l2 = m.channel.mlp
        return F.relu(z @ l1.weight.flatten(1).T + l1.bias) @ l2.weight.flatten(1).T + l2.bias

    z = sum(mlp(x.mean((2, 3)) if p == "avg" else x.amax((2, 3))) for p in pools)
    x1 = x * torch.sigmoid(z)[..., None, None]
    s = torch.cat([x1.mean(1, keepdim=True), x1.amax(1, keepdim=True)], 1)
    return x1 * torch.sigmoid(F.conv2d(s, m.spatial.conv.weight, m.spatial.conv.bias, padding=m.k // 2))


def test_cbam_uses_average_and_max_pooling():
    torch.manual_seed(0)
    m = CBAM(32, r=4, k=7)
    x = torch.randn(2, 32, 9, 9) * torch.linspace(0.1, 3, 32)[:, None, None]
    torch.testing.assert_close(m(x), _cbam_reference(m, x))
    avg_only = _cbam_reference(m, x, pools=("avg",))
    assert (m(x) - avg_only).abs().max() > 1e-3  # an average-only channel gate (Ultralytics' CBAM) is different


def test_sam_equals_paper_formula():
    m = SAM(8, k=3)
    x = torch.randn(2, 8, 6, 5)
    s = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)
    torch.testing.assert_close(m(x), x * torch.sigmoid(m.spatial.conv(s)))


@pytest.mark.parametrize(
    "make",
    [lambda: SE(8, r=2), lambda: ECA(8, k=3), lambda: SAM(4, k=3), lambda: CBAM(8, r=2, k=3), lambda: MHSA(8, heads=1)],
    ids=["SE", "ECA", "SAM", "CBAM", "MHSA"],
)
def test_gradcheck_float64(make):
    torch.manual_seed(0)
    m = make().double()
    x = torch.randn(1, m.c1, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,), eps=1e-6, atol=1e-4)


def mhsa_reference(m: MHSA, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The MHSA block written out with an explicit softmax(QKᵀ/√d)V, independent of the module's own code paths.

    ``mask`` (B, h, N, N): attention dropout's mask, 0 or 1 / (1 − p), multiplied into the softmax weights."""
    b, c, h, w = x.shape
    x = x + F.conv2d(x, m.pos.weight, m.pos.bias, padding=1, groups=c)
    t = x.flatten(2).transpose(1, 2)
    n1 = F.layer_norm(t, (c,), m.norm1.weight, m.norm1.bias, m.norm1.eps)
    q, k, v = (n1 @ m.qkv.weight.T + m.qkv.bias).split(c, -1)
    heads = lambda z: z.reshape(b, h * w, m.heads, c // m.heads).transpose(1, 2)  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(c // m.heads), -1)
    if mask is not None:
        a = a * mask
    o = (a @ v).transpose(1, 2).reshape(b, h * w, c)
    t = t + o @ m.proj.weight.T + m.proj.bias
    n2 = F.layer_norm(t, (c,), m.norm2.weight, m.norm2.bias, m.norm2.eps)
    t = t + m.mlp[2](F.gelu(m.mlp[0](n2)))
    return t.transpose(1, 2).reshape(b, c, h, w)


@pytest.mark.parametrize("hw", [(8, 8), (6, 13)])
def test_mhsa_equals_explicit_softmax(hw):
    torch.manual_seed(0)
    m = MHSA(64, heads=4).eval()
    x = torch.randn(2, 64, *hw)
    ref = mhsa_reference(m, x)
    torch.testing.assert_close(m(x), ref, atol=1e-5, rtol=1e-5)
    out, weights = m.explicit_attention(x)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert weights.shape == (2, 4, hw[0] * hw[1], hw[0] * hw[1])
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, hw[0] * hw[1]))


@pytest.mark.parametrize("imgsz", [(320, 320), (384, 640)])
def test_mhsa_in_whole_model_equals_explicit(imgsz):
    """Square and rectangular images through yolo11n-mhsa: the block's output equals the explicit computation."""
    from ultralytics import YOLO

    model = YOLO("models/yolo11n-mhsa.yaml").model.eval()
    block = next(m for m in model.modules() if isinstance(m, MHSA))
    seen = {}
    handle = block.register_forward_hook(lambda m, i, o: seen.update(x=i[0], y=o))
    with torch.no_grad():
        model(torch.rand(1, 3, *imgsz))
    handle.remove()
    assert seen["x"].shape[-2:] == (imgsz[0] // 32, imgsz[1] // 32)
    torch.testing.assert_close(seen["y"], mhsa_reference(block, seen["x"]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("p", [0.5])
def test_mhsa_attention_dropout_against_float64_softmax_with_the_same_mask(p):
    """Training with attn_drop = p: the fused block equals the explicit float64 block whose softmax weights are
    multiplied by the dropout mask (drawn from the same generator state: 0 or 1 / (1 − p), a fraction p of zeros).
    Another seed gives another output; eval mode is the block without dropout (attn_drop = 0, same weights)."""
    torch.manual_seed(0)
    m = MHSA(32, heads=2, attn_drop=p).train()
    x = torch.randn(2, 32, 5, 6)
    torch.manual_seed(1)
    y = m(x)
    torch.manual_seed(1)  # the block's one random draw: dropout of the (B, h, N, N) weights
    mask = F.dropout(torch.ones(2, 2, 30, 30), p)
    assert mask.unique().tolist() == pytest.approx([0.0, 1 / (1 - p)])
    assert abs((mask == 0).double().mean().item() - p) < 0.03  # 3600 draws: SD of the fraction <= 0.009
    m64 = copy.deepcopy(m).double()
    torch.testing.assert_close(y.double(), mhsa_reference(m64, x.double(), mask.double()), atol=1e-5, rtol=1e-5)
    assert (y - mhsa_reference(m64, x.double()).float()).abs().max() > 1e-2  # the mask changes the output
    torch.manual_seed(2)
    assert (m(x) - y).abs().max() > 1e-2  # a fresh mask per call
    plain = MHSA(32, heads=2).eval()
    plain.load_state_dict(m.state_dict())
    m.eval()
    torch.testing.assert_close(m(x), plain(x), atol=0, rtol=0)
    torch.testing.assert_close(m(x), mhsa_reference(m, x), atol=1e-5, rtol=1e-5)


def test_mhsa_attention_dropout_statistics_of_the_fused_kernel():
    """Read the fused kernel's dropped weights directly: with V = I (head width d = N), SDPA returns the weights
    themselves. Each is 0 or softmax(QKᵀ/√d) / (1 − p) (the explicit float64 softmax), zeros a fraction p; their
    mean over draws tends to the softmax (dropout keeps the expectation); eval mode drops nothing."""
    torch.manual_seed(0)
    n, p = 16, 0.25
    m = MHSA(n, heads=1, attn_drop=p).train()  # head width 16 = N: V can be the identity
    q, k = torch.randn(2, 1, n, n), torch.randn(2, 1, n, n)
    a = torch.softmax(q.double() @ k.double().transpose(-1, -2) / math.sqrt(n), -1)
    rep = lambda t: t.repeat(400, 1, 1, 1).contiguous()  # noqa: E731  400 draws as one batch: one mask per copy
    v = torch.eye(n).expand(2, 1, n, n)
    draws = m.attend(rep(q), rep(k), rep(v))[0].double().view(400, 2, 1, n, n)
    v = v.contiguous()
    kept = draws != 0
    torch.testing.assert_close(draws[kept], (a / (1 - p)).expand_as(draws)[kept], atol=1e-6, rtol=1e-5)
    zeros = 1 - kept.double().mean().item()  # 204800 draws: SD of the fraction ~0.001
    assert abs(zeros - p) < 0.005
    se = a * math.sqrt(p / (1 - p)) / math.sqrt(400)  # SD of a·B / (1 − p), B ~ Bernoulli(1 − p), over 400 draws
    assert ((draws.mean(0) - a).abs() <= 5 * se + 1e-9).all()
    m.eval()
    torch.testing.assert_close(m.attend(q, k, v)[0].double(), a, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mhsa_autocast_matches_fp32(dtype):
    """Large activations (×50) under fp16/bf16 autocast: finite, and the fp32 output within the dtype's precision
    (fp16: 10 mantissa bits, bf16: 7; errors relative to the output's largest value): zeros or a wrong result fail."""
    torch.manual_seed(0)
    m = MHSA(64, heads=4).eval()
    x = torch.randn(1, 64, 10, 10) * 50
    with torch.no_grad():
        ref = m(x)
        with torch.autocast("cpu", dtype=dtype):
            y = m(x)
    assert torch.isfinite(y).all()
    tol = 2e-3 if dtype == torch.float16 else 1.6e-2
    torch.testing.assert_close(y.float(), ref, atol=tol * ref.abs().max().item(), rtol=tol)


def test_mhsa_head_dim_and_sdpa_inputs_contiguous():
    m = MHSA(128, head_dim=32)
    assert (m.heads, m.head_dim) == (4, 32)
    q, k, v = m.qkv_heads(torch.randn(1, 50, 128))
    assert all(t.is_contiguous() and t.shape == (1, 4, 50, 32) for t in (q, k, v))


def test_mhsa_without_autograd_equals_autograd_and_reference():
    """No grad and autograd take the one path (the MLP on all tokens at once): the same output to 1e-6, equal to
    the reference, and x untouched; under bf16 autocast the fp32 residual stream stays fp32."""
    torch.manual_seed(0)
    m = MHSA(32, heads=2).eval()
    x = torch.randn(2, 32, 7, 9)
    x0 = x.clone()
    rows = []
    m.mlp[0].register_forward_hook(lambda mod, i, o: rows.append(i[0].shape[1]))
    with torch.no_grad():
        y = m(x)
    assert rows == [63] and torch.equal(x, x0)
    y_autograd = m(x)
    assert y_autograd.requires_grad
    torch.testing.assert_close(y, y_autograd.detach(), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(y, mhsa_reference(m, x), atol=1e-5, rtol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.no_grad():
            a = m(x)
        assert a.dtype == m(x).dtype == torch.float32


def test_mhsa_training_gradients_unchanged():
    """Training (autograd on) takes the plain path: no chunks, and the gradients of the explicit reference."""
    torch.manual_seed(0)
    m = MHSA(32, heads=2).train()
    x = torch.randn(2, 32, 5, 6, requires_grad=True)
    rows = []
    m.mlp[0].register_forward_hook(lambda mod, i, o: rows.append(i[0].shape[1]))
    m(x).square().sum().backward()
    assert rows == [30]
    got = {n: p.grad.clone() for n, p in m.named_parameters()} | {"x": x.grad.clone()}
    m.zero_grad()
    x.grad = None
    mhsa_reference(m, x).square().sum().backward()
    want = {n: p.grad for n, p in m.named_parameters()} | {"x": x.grad}
    for n in want:
        torch.testing.assert_close(got[n], want[n], atol=1e-5, rtol=1e-5, msg=n)


def test_identity_at_init_and_gate_learns():
    x = torch.randn(2, 32, 6, 6)
    for cls in attn_yolo.MODULES.values():
        m = cls(32, init_values=0.0)
        torch.testing.assert_close(m(x), x)
        m.scale.gamma.data.fill_(1.0)  # γ = 1: exactly the paper's block with the same weights
        plain = cls(32)
        plain.load_state_dict({k: v for k, v in m.state_dict().items() if not k.startswith("scale.")})
        torch.testing.assert_close(m(x), plain(x))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: SE(64, r=0), r"^SE: r=0 is invalid; allowed: an int in 1..64 \(hidden width C // r >= 1 at C=64"),
        (lambda: SE(64, r=65), r"^SE: r=65 is invalid; allowed: an int in 1..64"),  # C // r = 0: was clamped to 8
        (lambda: SE(64, r=True), r"^SE: r=True is invalid"),
        (lambda: SE(64, r=16.0), r"^SE: r=16.0 is invalid"),
        (lambda: CBAM(64, r=-2), r"^CBAM: r=-2 is invalid"),
        (lambda: CBAM(8, r=16), r"^CBAM: r=16 is invalid; allowed: an int in 1..8"),
        (lambda: ECA(64, k=4), r"^ECA: k=4 is invalid; allowed: a positive odd int <= C=64"),
        (lambda: ECA(8, k=9), r"^ECA: k=9 is invalid; allowed: a positive odd int <= C=8"),
        (lambda: SAM(64, k=5), r"^SAM: k=5 is invalid; allowed: the int 3 or 7"),
        (lambda: SAM(64, k=7.0), r"^SAM: k=7.0 is invalid; allowed: the int 3 or 7"),  # passed, then failed in torch
        (lambda: CBAM(64, k=5), r"^CBAM: k=5 is invalid; allowed: the int 3 or 7"),
        (lambda: MHSA(64, heads=3), r"^MHSA: heads=3 is invalid; allowed: a divisor of C=64 \(head width >= 8\)"),
        (lambda: MHSA(64, heads=3), r": \[1, 2, 4, 8\]$"),
        (lambda: MHSA(256, heads=256), r"^MHSA: heads=256 is invalid; allowed: a divisor of C=256 \(head width >= 8\)"),
        (lambda: MHSA(64, heads=16), r"^MHSA: heads=16 is invalid"),  # divides 64, but head width 4
        (lambda: MHSA(64, head_dim=7), r"^MHSA: head_dim=7 is invalid; allowed: a head width for C=64: \[64, 32, 16"),
        (lambda: MHSA(64, head_dim=4), r"^MHSA: head_dim=4 is invalid"),
        (lambda: MHSA(64, attn_drop=1.5), r"^MHSA: attn_drop=1.5 is invalid; allowed: a number in \[0, 1\)"),
        (lambda: MHSA(64, attn_drop=float("nan")), r"^MHSA: attn_drop=nan is invalid"),
        (lambda: MHSA(64, mlp_ratio=float("inf")), r"^MHSA: mlp_ratio=inf is invalid; allowed: a number in \(0, 16\]"),
        (lambda: MHSA(64, mlp_ratio=1e9), r"^MHSA: mlp_ratio=1000000000.0 is invalid"),  # was a 262 GB allocation
        (lambda: MHSA(64, mlp_ratio=0.001), r"^MHSA: mlp_ratio=0.001 is invalid; .* C \* mlp_ratio >= 1"),
        (lambda: MHSA(64, mlp_ratio=0), r"^MHSA: mlp_ratio=0 is invalid"),
        (lambda: SE(None), r"^SE: input channels c1=None; expected a positive int"),
        (lambda: SE(0), r"^SE: input channels c1=0; expected a positive int"),
        (lambda: CoordAtt(64, r=0), r"CoordAtt: r=0 is invalid; allowed: an int >= 1 \(paper: 32\)"),
        (lambda: EMA(48, factor=5), r"EMA: factor=5 is invalid; allowed: \[1, 2, 3, 4, 6, 8, 12, 16, 24, 48\]"),
        (lambda: SimAM(8, e_lambda=0), r"SimAM: e_lambda=0 is invalid; allowed: a finite number > 0"),
        (lambda: SimAM(8, e_lambda=float("inf")), r"^SimAM: e_lambda=inf is invalid; allowed: a finite number > 0"),
        (lambda: SimAM(8, e_lambda=float("nan")), r"^SimAM: e_lambda=nan is invalid"),
        (lambda: SimAM(8, e_lambda=-1e-4), r"^SimAM: e_lambda=-0.0001 is invalid"),
        (lambda: SimAM(8, e_lambda=True), r"^SimAM: e_lambda=True is invalid"),
        (lambda: GAM(64, rate=2.5),
         r"GAM: rate=2.5 is invalid; allowed: an int in 1..64 \(hidden width C // rate >= 1 at C=64; paper: 4\)"),
        (lambda: ShuffleAttention(64, groups=64), r"ShuffleAttention: groups=64 is invalid; allowed: \[1, 2, 4, 8, 16"),
        (lambda: TripletAttention(8, k=4), r"TripletAttention: k=4 is invalid; allowed: a positive odd int \(paper: 7"),
        (lambda: NAM(0), r"NAM: input channels c1=0; expected a positive int"),
    ],
)
def test_bad_hyperparameters(make, match):
    with pytest.raises(AttnBuildError, match=match):
        make()


@pytest.mark.parametrize("name", list(attn_yolo.MODULES))
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.5, 1.5, "0.1", True])
def test_init_values_finite_in_unit_interval(name, bad):
    """NaN built a model whose outputs were NaN; every block refuses a gate init outside [0, 1]."""
    with pytest.raises(AttnBuildError, match=rf"^{name}: init_values={bad!r} is invalid; allowed: None \(no gate\) or"):
        attn_yolo.MODULES[name](64, init_values=bad)
    assert attn_yolo.MODULES[name](64, init_values=1e-5).scale.gamma[0].item() == pytest.approx(1e-5)
