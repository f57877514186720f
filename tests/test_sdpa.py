"""attn_yolo.sdpa: Ultralytics' own Attention / AAttn on SDPA equal to an independent float64 computation and to stock
(layers, yolo11n / yolo12n / yolo26n, gradients), the kernel choice, stock checkpoints (byte-identical state_dict,
loading without attn_yolo, safe loading), deepcopy vs pickle, the CLI's sdpa=, ablation configs, export, DDP."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from ultralytics.nn.modules.block import A2C2f, AAttn, Attention
from ultralytics.nn.tasks import DetectionModel

import attn_yolo
import attn_yolo_console as console
from attn_yolo import cli
from attn_yolo import sdpa as S
from attn_yolo.bench.common import profile_kernel

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def stock_process_default():
    """Every test starts and ends with the process default off and no CLI callbacks."""
    S.set_default(False)
    S.register_default_callbacks(False)
    yield
    S.set_default(False)
    S.register_default_callbacks(False)


@pytest.fixture
def always_sdpa(monkeypatch):
    """SDPA at every size on CPU (the thresholds would send tiny test maps down the explicit path)."""
    for k in S.CPU_MIN_TOKENS:
        monkeypatch.setitem(S.CPU_MIN_TOKENS, k, 0)


@pytest.fixture
def sdpa_calls(monkeypatch):
    """Counts calls of F.scaled_dot_product_attention (the fused forwards call it through ``F``)."""
    calls = []
    real = F.scaled_dot_product_attention

    def counting(*a, **k):
        calls.append(a[0].shape)
        return real(*a, **k)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    return calls


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b|."""
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def assert_grads_close(fused: dict, stock: dict, tol: float = 1e-4) -> None:
    """Every gradient tensor equal within ``tol`` relative (max |Δ| / max |g|). A gradient that is zero by the math
    (the bias of a BatchNorm feeding another BatchNorm in training mode, e.g. ``pe`` before ``proj``) is rounding
    noise; it is measured against 1e-2 of the largest gradient instead of against itself, i.e. to 1e-6 of the
    largest: float32 sums of a few hundred terms round at about that (1.3e-7 of it measured on an Intel Xeon, where
    1e-7 was too tight for AAttn's flash backward)."""
    assert fused.keys() == stock.keys() and fused
    top = max(float(g.abs().max()) for g in stock.values())
    for k, g in stock.items():
        err = float((fused[k].double() - g.double()).abs().max())
        assert err <= tol * max(float(g.abs().max()), 1e-2 * top), (k, err, float(g.abs().max()))


def reference(m, x: torch.Tensor) -> torch.Tensor:
    """Ultralytics' attention written from its equations in float64, head by head and area by area (no reshape
    tricks): softmax(qᵀk · scale) applied to v, plus pe(v), then proj. Attention: per head rows [q (key_dim), k
    (key_dim), v (head_dim)], scale key_dim^-0.5. AAttn: per head rows [q, k, v] (head_dim each), the H·W tokens cut
    into ``area`` consecutive strips (rows of the map), scale head_dim^-0.5."""
    qkv_conv, pe, proj = (copy.deepcopy(c).double() for c in (m.qkv, m.pe, m.proj))
    x = x.double()
    B, _, H, W = x.shape
    N = H * W
    t = qkv_conv(x).flatten(2)  # (B, rows, N)
    if isinstance(m, Attention):
        nh, kd, hd, area, scale = m.num_heads, m.key_dim, m.head_dim, 1, m.key_dim**-0.5
        q_rows, k_rows, v_rows = ([h * (2 * kd + hd) + o + j for h in range(nh) for j in range(w)]
                                  for o, w in ((0, kd), (kd, kd), (2 * kd, hd)))  # fmt: skip
    else:
        nh, kd, hd, area, scale = m.num_heads, m.head_dim, m.head_dim, max(m.area, 1), m.head_dim**-0.5
        q_rows, k_rows, v_rows = ([h * 3 * hd + o + j for h in range(nh) for j in range(hd)] for o in (0, hd, 2 * hd))
    q, k, v = t[:, q_rows].view(B, nh, kd, N), t[:, k_rows].view(B, nh, kd, N), t[:, v_rows].view(B, nh, hd, N)
    out = torch.empty_like(v)
    n = N // area
    for a in range(area):
        s = slice(a * n, (a + 1) * n)
        p = torch.softmax(torch.einsum("bhdi,bhdj->bhij", q[..., s], k[..., s]) * scale, dim=-1)  # (B, nh, i, j)
        out[..., s] = torch.einsum("bhij,bhdj->bhdi", p, v[..., s])
    v_map = v.reshape(B, nh * hd, H, W)
    return proj(out.reshape(B, nh * hd, H, W) + pe(v_map))


LAYERS = {  # id → (factory, input shape)
    "Attention-C2PSA-yolo11n": (lambda: Attention(128, num_heads=2, attn_ratio=0.5), (2, 128, 20, 16)),
    "Attention-ratio1": (lambda: Attention(64, num_heads=1, attn_ratio=1.0), (2, 64, 9, 7)),
    "Attention-ratio2": (lambda: Attention(64, num_heads=4, attn_ratio=2.0), (2, 64, 8, 8)),
    "AAttn-area4": (lambda: AAttn(64, num_heads=2, area=4), (2, 64, 16, 12)),
    "AAttn-area1": (lambda: AAttn(128, num_heads=4, area=1), (2, 128, 12, 20)),
    "AAttn-area2-rect": (lambda: AAttn(64, num_heads=2, area=2), (2, 64, 6, 10)),
}


def _layer(name):
    make, shape = LAYERS[name]
    torch.manual_seed(0)
    m = make().eval()
    for p in m.parameters():  # not the init: BatchNorm scale/shift and pe weights all away from their defaults
        torch.nn.init.normal_(p, 0.0, 0.3)
    return m, torch.randn(shape)


@pytest.mark.parametrize("name", LAYERS)
def test_layer_equals_float64_reference_and_stock(name, always_sdpa):
    m, x = _layer(name)
    with torch.no_grad():
        ref, stock = reference(m, x), m(x)
        S.fuse_attention(m)
        fused = m(x)
        kernel = profile_kernel(lambda: m(x))
    assert rel(stock, ref) < 1e-5  # the reference reads Ultralytics' layout right
    assert rel(fused, ref) < 1e-5 and rel(fused, stock) < 1e-5
    assert rel(ref, proj_only(m, x)) > 1e-2  # attention moves the output: the comparison is not vacuous
    assert kernel == "flash (CPU)"  # unit-stride layout, equal widths: never SDPA's math fallback


def proj_only(m, x):
    """The layer with its attention replaced by v (to show the attention term matters)."""
    with torch.no_grad():
        saved = torch.softmax
        try:
            torch.softmax = lambda s, dim: torch.eye(s.shape[-1], dtype=s.dtype).expand_as(s)
            return reference(m, x)
        finally:
            torch.softmax = saved


@pytest.mark.parametrize("name", ["Attention-C2PSA-yolo11n", "AAttn-area4", "AAttn-area1"])
def test_layer_gradients_equal(name, always_sdpa):
    m, x = _layer(name)
    m.train()
    grads, w = {}, torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    for on in (False, True):
        S.fuse_attention(m, on)
        m.zero_grad()
        xx = x.clone().requires_grad_()
        (m(xx) * w).sum().backward()
        grads[on] = {"input": xx.grad, **{k: p.grad for k, p in m.named_parameters()}}
    assert_grads_close(grads[True], grads[False])
    assert rel(grads[True]["input"], grads[False]["input"]) < 1e-4


def test_kernel_choice_by_device_and_shape():
    m = S.fuse_attention(Attention(128, num_heads=2).eval())  # key_dim 32 < head_dim 64: padded
    a = S.fuse_attention(AAttn(64, num_heads=2, area=4).eval())
    small, big = torch.randn(1, 128, 16, 16), torch.randn(1, 128, 20, 20)  # 256 / 400 tokens
    assert S.CPU_MIN_TOKENS["padded"] > 256 and S.kernel_for(m, small) == "explicit"
    assert S.kernel_for(m, big) == "sdpa"
    assert S.kernel_for(a, torch.randn(1, 64, 40, 40)) == "sdpa"  # 4 strips of 400
    assert S.kernel_for(a, torch.randn(1, 64, 20, 20)) == "explicit"  # 4 strips of 100
    assert S.kernel_for(a, torch.randn(1, 64, 10, 9)) == "explicit"  # 90 tokens do not split into 4 areas
    assert S.kernel_for(m, big.to(torch.int32)) == "explicit"
    with torch.no_grad():
        assert profile_kernel(lambda: m(small)) == "explicit (matmul + softmax)"  # below the threshold: stock code
        assert profile_kernel(lambda: m(big)) == "flash (CPU)"
    m.format = "coreml"  # Ultralytics' CoreML export: its own code path
    assert S.kernel_for(m, big) == "explicit"


def calibrate(model: torch.nn.Module, x: torch.Tensor) -> None:
    """Give a from-scratch detector unit-scale features (each BatchNorm scaled to unit output std on ``x``, as LSUV)
    and undamped A2C2f branches (γ = 1 instead of 0.01), so that attention moves the outputs."""
    def unit(bn, inp, out):
        s = float(out.std()) or 1.0
        bn.weight.data /= s
        bn.bias.data /= s
        return out / s

    hooks = [m.register_forward_hook(unit) for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        model.eval()(x)
    for h in hooks:
        h.remove()
    for m in model.modules():
        if isinstance(m, A2C2f) and m.gamma is not None:
            m.gamma.data.fill_(1.0)


def tensors(o) -> list[torch.Tensor]:
    if torch.is_tensor(o):
        return [o]
    if isinstance(o, dict):
        return [t for v in o.values() for t in tensors(v)]
    return [t for v in o for t in tensors(v)] if isinstance(o, (list, tuple)) else []


def _model_outputs_equal(yaml: str, sizes):
    torch.manual_seed(0)
    model = DetectionModel(yaml, verbose=False)
    calibrate(model, torch.rand(2, 3, *sizes[0]))
    layers = S.attention_layers(model)
    assert layers, yaml
    seen = {}
    hooks = [m.register_forward_hook(lambda mod, i, o, n=n: seen.__setitem__(n, (i[0], o))) for n, m in layers]
    for hw in sizes:
        x = torch.rand(2, 3, *hw)
        out = {}
        for on in (False, True):
            S.fuse_attention(model, on)
            with torch.no_grad():
                out[on] = (tensors(model(x)), dict(seen))
        for a, b in zip(*(out[k][0] for k in (True, False))):
            assert rel(a, b) < 1e-5, (yaml, hw)
        for n, _ in layers:  # each attention output equal, and of a size that matters next to its input
            (xi, fused), (_, stock) = out[True][1][n], out[False][1][n]
            assert rel(fused, stock) < 1e-5, (yaml, hw, n)
            assert float(stock.abs().max()) > 1e-2 * float(xi.abs().max()), (yaml, hw, n)
    for h in hooks:
        h.remove()


@pytest.mark.parametrize("yaml", ["yolo11n.yaml", "yolo12n.yaml", "yolo26n.yaml"])
def test_models_equal_to_stock(yaml, always_sdpa):
    _model_outputs_equal(yaml, [(256, 256), (160, 256)])


@pytest.mark.slow
@pytest.mark.parametrize("yaml", ["yolo11n.yaml", "yolo12n.yaml", "yolo26n.yaml"])
def test_models_equal_to_stock_640(yaml):
    _model_outputs_equal(yaml, [(640, 640), (384, 640)])  # the shipped thresholds (SDPA at 640)


@pytest.mark.parametrize("yaml", ["yolo11n.yaml", "yolo12n.yaml", "yolo26n.yaml"])
def test_training_gradients_equal(yaml, always_sdpa, sdpa_calls):
    """One training step (Ultralytics' detection loss, batch 2 at 128 px, from-scratch init): every parameter's
    gradient equal within 1e-4. Control: scaling each attention output by 1 + 1e-3 in the stock model moves some
    gradient by far more than that, so the check sees the attention. (BatchNorm-calibrated weights as in
    ``test_models_equal_to_stock`` make the training-mode network chaotic: 1e-7 rounding grows to 1e-3 there.)"""
    from ultralytics.cfg import get_cfg

    from attn_yolo.bench.train import random_detection_batch

    torch.manual_seed(0)
    model = DetectionModel(yaml, verbose=False)
    batch = random_detection_batch(2, 128)
    model.args = get_cfg()
    grads = {}
    for name, on, eps in (("stock", False, 0.0), ("fused", True, 0.0), ("control", False, 1e-3)):
        hooks = [m.register_forward_hook(lambda mod, i, o, e=eps: o * (1 + e)) for _, m in S.attention_layers(model)]
        S.fuse_attention(model, on)
        model.train()
        model.zero_grad()
        loss, _ = model.loss(batch)
        loss.sum().backward()
        grads[name] = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        for h in hooks:
            h.remove()
    assert sdpa_calls
    assert_grads_close(grads["fused"], grads["stock"])
    with pytest.raises(AssertionError):
        assert_grads_close(grads["control"], grads["stock"], tol=1e-3)


def _save_bytes(obj) -> bytes:
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


BYTES_CHECK = textwrap.dedent("""
    import copy, io, sys
    import torch
    from ultralytics.nn.tasks import DetectionModel
    from attn_yolo import sdpa as S

    def save(obj):
        b = io.BytesIO()
        torch.save(obj, b)
        return b.getvalue()

    for k in S.CPU_MIN_TOKENS:
        S.CPU_MIN_TOKENS[k] = 0  # SDPA at every size, as the always_sdpa fixture
    torch.manual_seed(0)
    model = DetectionModel("yolo12n.yaml", verbose=False).eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        model(x)  # Detect caches its anchors per input shape: the same forward before both snapshots
    sd, ckpt = save(model.state_dict()), save({"model": copy.deepcopy(model).half()})
    S.fuse_attention(model)
    with torch.no_grad():
        model(x)
    assert all(S.is_fused(m) for _, m in S.attention_layers(model))
    before = torch.load(io.BytesIO(sd))
    changed = [k for k, v in model.state_dict().items() if v.numpy().tobytes() != before[k].numpy().tobytes()]
    assert not changed, changed
    assert save(model.state_dict()) == sd  # byte-identical
    copied = copy.deepcopy(model).half()  # what Ultralytics' save_model pickles (the EMA, deep-copied)
    assert all(S.is_fused(m) for _, m in S.attention_layers(copied))
    assert save({"model": copied}) == ckpt  # the whole pickled checkpoint too: nothing of attn_yolo in it
    print("ok")
""")


def test_state_dict_and_checkpoint_bytes_unchanged():
    """In a fresh process (no state left by other tests): fusing changes no byte of the state_dict or checkpoint."""
    r = subprocess.run([sys.executable, "-c", BYTES_CHECK], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "YOLO_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_deepcopy_carries_the_setting_pickle_does_not():
    m = S.fuse_attention(DetectionModel("yolo11n.yaml", verbose=False))
    assert all(S.is_fused(x) for _, x in S.attention_layers(copy.deepcopy(m)))
    loaded = torch.load(io.BytesIO(_save_bytes(m)), weights_only=False)
    assert type(S.attention_layers(loaded)[0][1]) is Attention
    assert not any(S.is_fused(x) for _, x in S.attention_layers(loaded))


def test_second_call_is_a_no_op_and_undo():
    from ultralytics import YOLO

    y = YOLO("yolo12n.yaml")
    layers = [m for _, m in S.attention_layers(y)]
    assert len(layers) == 8 and not any(map(S.is_fused, layers))
    assert S.fuse_attention(y) is y and S.fuse_attention(y) is y
    assert all(map(S.is_fused, layers)) and y.callbacks["on_pretrain_routine_end"].count(S._fuse_trainer) == 1
    S.unfuse_attention(y)
    assert not any(map(S.is_fused, layers)) and S._fuse_trainer not in y.callbacks["on_pretrain_routine_end"]
    S.fuse_attention(y)
    S.fuse_attention(y, enabled=False)
    assert not any(map(S.is_fused, layers))
    S.set_default(True)  # a model's own setting wins over the process default
    assert not any(map(S.is_fused, layers)) and S.is_fused(Attention(64, 1))
    assert not S.is_fused(torch.nn.Conv2d(1, 1, 1))
    with pytest.raises(TypeError, match="expected a YOLO model or a torch.nn.Module"):
        S.fuse_attention("yolo12n.pt")
    with pytest.raises(TypeError, match="expected True or False"):
        S.fuse_attention(y, enabled="yes")
    assert attn_yolo.fuse_attention is S.fuse_attention and attn_yolo.unfuse_attention is S.unfuse_attention


def test_cli_sdpa_value_checked_and_stripped(capsys, tmp_path, assets):
    assert console.main(["val", "model=yolo11n.yaml", "sdpa=maybe"]) == 2
    assert "sdpa: 'maybe'; expected True or False" in capsys.readouterr().err
    assert cli.take_flag(["train", "sdpa=True", "epochs=1"], "sdpa", False, "") == (["train", "epochs=1"], True)
    assert cli.take_flag(["train", "epochs=1"], "sdpa", False, "") == (["train", "epochs=1"], False)
    # a real process: Ultralytics parses the argv it saw at import, so the flag must be taken out of that too
    r = subprocess.run([sys.executable, "-m", "attn_yolo_console", "predict", "model=yolo12n.yaml",
                        f"source={assets / 'bus.jpg'}", "imgsz=64", "save=False", "sdpa=True"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "YOLO_OFFLINE": "1", "PYTHONPATH": str(REPO)})  # fmt: skip
    assert r.returncode == 0 and "not a valid YOLO argument" not in r.stdout + r.stderr, r.stderr[-3000:]


FRESH_PREDICT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import ultralytics
    from ultralytics import YOLO
    y = YOLO(sys.argv[1])
    r = y.predict(str(Path(ultralytics.__file__).parent / "assets" / "bus.jpg"), imgsz=64, verbose=False)
    types = sorted({type(m).__module__ + "." + type(m).__name__ for m in y.model.modules()
                    if type(m).__name__ in ("Attention", "AAttn")})
    print(json.dumps({"attn_yolo": [k for k in sys.modules if k.startswith("attn_yolo")], "types": types,
                      "boxes": len(r[0].boxes)}))
""")


def test_trained_with_cli_sdpa_loads_in_plain_ultralytics(tiny_data, tmp_path, always_sdpa, sdpa_calls):
    """`attn-yolo train ... sdpa=True`: trains fused (model and EMA), its best.pt loads and predicts in a process that
    never imports attn_yolo, also with ULTRALYTICS_SAFE_LOAD=1."""
    from ultralytics.utils.callbacks import base

    seen = []

    def record(trainer):
        seen.append([S.is_fused(m) for t in (trainer.model, trainer.ema.ema) for _, m in S.attention_layers(t)])

    base.default_callbacks["on_train_batch_end"].append(record)
    try:
        code = console.main(["train", "model=yolo12n.yaml", f"data={tiny_data}", "epochs=1", "imgsz=64", "batch=4",
                         "workers=0", "plots=False", "device=cpu", f"project={tmp_path}", "name=run", "sdpa=True"])
    finally:
        base.default_callbacks["on_train_batch_end"].remove(record)
    assert code == 0 and seen and all(all(s) and len(s) == 16 for s in seen) and sdpa_calls
    best = tmp_path / "run" / "weights" / "best.pt"
    assert best.is_file()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the child cannot even find attn_yolo
    for extra in ({}, {"ULTRALYTICS_SAFE_LOAD": "1"}):
        r = subprocess.run([sys.executable, "-c", FRESH_PREDICT, str(best)], capture_output=True, text=True,
                           cwd=tmp_path, env={**env, "YOLO_OFFLINE": "1", **extra}, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["attn_yolo"] == [] and out["types"] == ["ultralytics.nn.modules.block.AAttn"], out


DDP_WORKER = textwrap.dedent("""
    import json, sys, types
    from ultralytics.utils.patches import torch_load
    state = torch_load(sys.argv[1], map_location="cpu")  # as Ultralytics' generated DDP script does
    from ultralytics.nn.tasks import DetectionModel
    from ultralytics.utils.torch_utils import ModelEMA
    model = DetectionModel("yolo12n.yaml", verbose=False)
    trainer = types.SimpleNamespace(model=state["model"], ema=ModelEMA(state["model"]), args=None)
    for event in ("on_pretrain_routine_start", "on_pretrain_routine_end"):
        for cb in state["callbacks"][event]:
            cb(trainer)
    from attn_yolo.sdpa import attention_layers, is_fused
    fused = lambda m: [is_fused(a) for _, a in attention_layers(m)]
    print(json.dumps({"model": fused(trainer.model), "ema": fused(trainer.ema.ema), "new": fused(model)}))
""")


@pytest.mark.parametrize("how", ["cli", "python"])
def test_callbacks_reach_ddp_workers(tmp_path, how):
    """The callbacks travel in Ultralytics' DDP temp file (``generate_ddp_file``: trainer class, args, model and
    callbacks, cloudpickled) and fuse the worker's model and EMA there. ``cli``: ``sdpa=True`` (the process default,
    also for models the worker builds later); ``python``: ``fuse_attention(YOLO)`` (the trainer's model and EMA)."""
    import types

    from ultralytics import YOLO
    from ultralytics.utils.dist import generate_ddp_file

    if how == "cli":
        S.register_default_callbacks(True)  # what cli.main does for sdpa=True, before Ultralytics builds the YOLO
        y = YOLO("yolo12n.yaml")
    else:
        y = S.fuse_attention(YOLO("yolo12n.yaml"))
    S.register_default_callbacks(False)
    trainer = types.SimpleNamespace(args=types.SimpleNamespace(), model=S.unfuse_attention(y.model),
                                    callbacks=y.callbacks)  # fmt: skip
    py = Path(generate_ddp_file(trainer))
    pt = py.with_suffix(".pt")
    try:
        r = subprocess.run([sys.executable, "-c", DDP_WORKER, str(pt)], capture_output=True, text=True,
                           env={**os.environ, "YOLO_OFFLINE": "1"}, timeout=300)  # fmt: skip
    finally:
        py.unlink(missing_ok=True)
        pt.unlink(missing_ok=True)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["model"] == [True] * 8 and out["ema"] == [True] * 8
    assert out["new"] == [how == "cli"] * 8


def test_ablation_train_sdpa(tiny_data, tmp_path, always_sdpa, sdpa_calls):
    from conftest import write_config

    from attn_yolo.ablate.config.ablation import ConfigError, load_config
    from attn_yolo.ablate.config.validate import validate
    from attn_yolo.ablate.runs.runner import plan
    from attn_yolo.ablate.runs.train import execute_run

    train = {"epochs": 1, "imgsz": 64, "batch": 4, "workers": 0, "plots": False, "device": "cpu"}
    with pytest.raises(ConfigError, match=r"train.sdpa: 1; expected true or false"):
        validate(*load_config(write_config(tmp_path, tiny_data, train={**train, "sdpa": 1}))[:2])
    cfg = write_config(tmp_path, tiny_data, variants=[{"name": "y12", "model": "yolo12n.yaml"},
                       {"name": "y12se", "base": "yolo12n.yaml", "module": "SE", "at": "sppf"}], seeds=[0],
                       train={**train, "sdpa": True}, latency={"repeats": 1, "warmup": 0})  # fmt: skip
    ab = validate(*load_config(cfg)[:2])
    assert ab.sdpa is True and "sdpa" not in ab.train and ab.config["train"]["sdpa"] is True  # held once
    spec = plan(ab, ab.data)[0]
    assert spec.sdpa is True and "sdpa" not in spec.train
    row = execute_run(spec)
    assert row["status"] == "ok", row.get("error")
    assert sdpa_calls  # fused during training (and for the latency)


def test_export_fused_yolo12n_verifies(tmp_path, capsys, sdpa_calls):
    pytest.importorskip("onnxruntime")
    from test_export import informative
    from ultralytics import YOLO

    torch.manual_seed(0)
    y = YOLO("yolo12n.yaml")
    informative(y, imgsz=128)
    pt = tmp_path / "y12.pt"
    y.save(str(pt))
    assert console.main(["export", f"model={pt}", "imgsz=128", "opset=13", "sdpa=True"]) == 2
    assert "AAttn (sdpa) (layer 6) needs opset >= 14" in capsys.readouterr().err
    assert not sdpa_calls
    assert console.main(["export", f"model={pt}", "imgsz=128", "simplify=False", "sdpa=True"]) == 0
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "y12.verify.json").read_text())
    assert "PASSED" in printed and report["passed"]
    assert any(c["name"] == "nms" and c["passed"] and not c["not_run"] for c in report["checks"]), report
    # traced on SDPA: 8 AAttn layers (the verification's PyTorch side at 128 px takes the explicit path on CPU)
    assert len(sdpa_calls) == 8


def test_bench_section_quick():
    from attn_yolo.bench import parse_args
    from attn_yolo.bench.ultralytics_attn import ultralytics_section

    cfg = parse_args(["quick=True", "sections=ultralytics", "isolate=False", "threads=1"])
    s = ultralytics_section(cfg)
    text = "\n".join(s.body)
    assert text.count("| yolo11n | 64 |") == 2 and text.count("| yolo12n | 64 |") == 2
    assert "flash (CPU)" in text and "explicit (matmul + softmax)" in text and "SDPA forced" in text
    assert "| explicit |" in text  # the thresholds send the 8×8 maps down Ultralytics' own path


@pytest.mark.slow  # profiles 16 whole-model passes: minutes on a shared 2-core machine
def test_device_rows_on_cpu(always_sdpa):
    """scripts/gpu_check.py's comparison, run on CPU (bf16 autocast): stock explicit, fused flash, efficient has no
    CPU kernel and says so."""
    from attn_yolo.bench.ultralytics_attn import device_rows

    rows = device_rows("cpu", yamls=("yolo12n.yaml",), sizes=(32,), dtypes=("bfloat16",), repeats=1)
    by = {(r[3], r[4]): r for r in rows}
    assert by["stock (explicit)", "forward"][5] == "explicit (matmul + softmax)"
    assert by["fused (dispatcher)", "train"][5] == "flash (CPU); bwd: flash (CPU)"
    assert by["fused, flash forced", "forward"][5] == "flash (CPU)"
    assert str(by["fused, memory-efficient forced", "forward"][6]).startswith("unavailable")
    assert float(by["stock (explicit)", "train"][7]) == 1.0


@pytest.mark.parametrize("make", [lambda: Attention(64, num_heads=2), lambda: AAttn(64, num_heads=2, area=4)])
def test_attention_free_bound_drops_only_the_attention_math(make):
    """The bench's bound (``attention_free``): inside, each layer is proj(v + pe(v)) with v sliced from qkv by hand
    (Ultralytics' channel layout: per head q | k | v); outside, the stock output again."""
    from attn_yolo.bench.ultralytics_attn import attention_free

    torch.manual_seed(0)
    m, x = make().eval(), torch.randn(2, 64, 8, 8)
    stock = m(x)
    nh, hd = m.num_heads, m.head_dim
    kd = getattr(m, "key_dim", hd)
    qkv = m.qkv(x).reshape(2, nh, 2 * kd + hd, 64)
    v = qkv[:, :, 2 * kd :, :].reshape(2, 64, 8, 8)
    with attention_free(m):
        assert torch.allclose(m(x), m.proj(v + m.pe(v)), atol=1e-6)
        assert not torch.allclose(m(x), stock, atol=1e-3)
    assert "forward" not in vars(m) and torch.equal(m(x), stock)


def test_training_target_names_the_attention_free_bound():
    """A missed 1.3× whose bound is below 1.3 says no kernel can reach it, with the share fused takes."""
    from attn_yolo.bench.common import Section
    from attn_yolo.bench.ultralytics_attn import _targets

    s = Section("6")
    res = {("yolo12n.yaml", 640): {"train": {"speed": 1.14, "bound": 1.28, "memory": 1.1}}}
    _targets(s, res)
    row = next(t for t in s.targets if "1.3×" in t[0])
    assert row[2] == "missed" and "bound 1.28×: no kernel can reach 1.3× here" in row[3]
    assert f"{100 * (1 - 1 / 1.14) / (1 - 1 / 1.28):.2g} %" in row[3]  # (1 - fused/stock) / (1 - none/stock)
