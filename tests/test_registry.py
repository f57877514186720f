"""Registration with Ultralytics: YAML names resolve, widths are inferred at every scale, errors name the row."""

import functools
import subprocess
import sys
from copy import deepcopy
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import ultralytics
from torch.utils.flop_counter import FlopCounterMode
from ultralytics.nn import tasks
from ultralytics.nn.tasks import DetectionModel, guess_model_task, yaml_model_load
from ultralytics.utils.torch_utils import get_flops

import attn_yolo
from attn_yolo import MHSA, AttnBuildError, ModelYamlError, UnknownModuleError
from attn_yolo.insertion import insert_dict
from attn_yolo.registry import ALIASES

REPO = Path(__file__).resolve().parents[1]
BLOCKS = ["se", "eca", "sam", "cbam", "mhsa"]
CFG = Path(ultralytics.__file__).parent / "cfg" / "models"


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def total(out):
    """Sum of every tensor in a (nested) model output."""
    if isinstance(out, torch.Tensor):
        return out.float().sum()
    return sum(total(o) for o in (out.values() if isinstance(out, dict) else out))


def block_params(model):
    return sum(n_params(m) for m in model.modules() if type(m) in attn_yolo.MODULES.values())


@functools.cache
def stock_params(base: str) -> int:
    """Parameters of Ultralytics' own ``base`` model, built once per worker (each scale serves every block)."""
    return n_params(DetectionModel(base, verbose=False))


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("scale", "nsmlx")
def test_every_block_every_scale_forward_backward(block, scale):
    model = DetectionModel(str(REPO / f"models/yolo11{scale}-{block}.yaml"), verbose=False)
    assert model.yaml["scale"] == scale and model.stride.tolist() == [8, 16, 32]
    assert n_params(model) == stock_params(f"yolo11{scale}.yaml") + block_params(model)  # blocks: the only difference
    model.train()
    out = model(torch.rand(2, 3, 64, 96))
    total(out).backward()
    blocks = [m for m in model.modules() if type(m) in attn_yolo.MODULES.values()]
    assert len(blocks) == (1 if block == "mhsa" else 3)
    assert all(p.grad is not None for b in blocks for p in b.parameters())


NEW = ["CoordAtt", "EMA", "SimAM", "GAM", "ShuffleAttention", "TripletAttention", "NAM"]


@pytest.mark.parametrize("base", ["yolo11n", "yolo11s", "yolo11m", "yolo11l", "yolo11x", "yolov8n"])
def test_new_blocks_every_scale_forward_backward(base):
    """All seven blocks chained after each backbone output (P3/P4/P5) of every yolo11 scale and of yolov8n, widths
    from the rows (64 to 768 channels): training forward and backward on a rectangular batch; at scale n also the
    built DetectionModel's eval forwards, square and rectangular. (The larger scales run the parsed layers directly:
    DetectionModel's own 256×256 stride pass would cost more than the test.)"""
    d = insert_dict(f"{base}.yaml", NEW, at="backbone", check=False)
    if base.endswith("n"):
        model = DetectionModel(d, verbose=False)
        layers, save = model.model, model.save
    else:
        layers, save = tasks.parse_model(d, 3, verbose=False)
    blocks = [m for m in layers if type(m) in attn_yolo.MODULES.values()]
    assert [type(m).__name__ for m in blocks] == NEW * 3
    widths = {"yolo11n": [128, 128, 256], "yolo11s": [256, 256, 512], "yolo11m": [512] * 3, "yolo11l": [512] * 3,
              "yolo11x": [768] * 3, "yolov8n": [64, 128, 256]}[base]
    assert [m.c1 for m in blocks] == [c for c in widths for _ in NEW]
    layers.train()
    x, y = torch.rand(2, 3, 64, 96), []
    for m in layers:  # DetectionModel._predict_once
        if m.f != -1:
            x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
        x = m(x)
        y.append(x if m.i in save else None)
    total(x).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for b in blocks for p in b.parameters())
    if base.endswith("n"):
        model.eval()
        with torch.no_grad():
            for shape in [(1, 3, 64, 64), (1, 3, 96, 64)]:
                assert model(torch.rand(shape))[0].shape[:2] == (1, 84)


def stock_yamls() -> list[Path]:
    """Every detect, segment, pose, obb and classify model YAML shipped with Ultralytics (RT-DETR included), except
    one whose TorchVision backbone downloads weights while it builds."""
    keep = []
    for p in sorted(CFG.rglob("*.yaml")):
        task = guess_model_task(yaml_model_load(p)) or ("detect" if "rtdetr" in p.name else None)
        if task in ("detect", "segment", "pose", "obb", "classify") and "TorchVision" not in p.read_text():
            keep.append(p)
    return keep


def meta_structure(d: dict) -> tuple:
    """What the model Ultralytics builds from ``d`` is (on the meta device): its parameter count, every parameter's
    and buffer's name and shape, and every module's class and ``repr`` arguments, in order."""
    model = SimpleNamespace()
    with torch.device("meta"):
        tasks._initialize_yolo_model(model, deepcopy(d), 3, None, False)
    m = model.model
    tensors = [(k, tuple(v.shape)) for k, v in m.state_dict().items()]
    modules = [(k, type(v).__module__ + "." + type(v).__name__, v.extra_repr()) for k, v in m.named_modules()]
    return sum(p.numel() for p in m.parameters()), tensors, modules


def test_every_stock_yaml_builds_identically_with_and_without_plugin():
    """All 63 shipped YAMLs at their smallest scale: the same model with the plugin registered and without it (every
    module's class and arguments, every parameter's and buffer's name and shape).

    Built on the meta device (shapes only, nothing allocated), so 60+ models take seconds.
    """
    paths, built = stock_yamls(), {}
    for p in paths:
        d = yaml_model_load(p)
        d["scale"] = next(iter(d.get("scales") or {None: 0}))
        built[p.name] = [meta_structure(d)]
    attn_yolo.unregister()
    try:
        for p in paths:
            d = yaml_model_load(p)
            d["scale"] = next(iter(d.get("scales") or {None: 0}))
            built[p.name].append(meta_structure(d))
    finally:
        attn_yolo.register()
    assert len(paths) >= 63 and {"yolo11-cls.yaml", "yolov8-obb.yaml", "yolo26-pose.yaml"} <= set(built)
    assert [k for k, v in built.items() if v[0] != v[1]] == []
    assert built["yolov8.yaml"][0][0] == 3_157_200  # yolov8n, as Ultralytics reports it


def tasks_module_names() -> set[str]:
    """Names Ultralytics itself binds at module level in ``ultralytics/nn/tasks.py`` (where ``parse_model`` looks a
    YAML name up), read from its source: imports, classes, functions, assignments. Independent of registration."""
    import ast

    def top(nodes):  # module-level statements, also inside module-level if / try blocks
        for n in nodes:
            yield n
            if isinstance(n, (ast.If, ast.Try)):
                handlers = [x for h in getattr(n, "handlers", []) for x in h.body]
                yield from top(n.body + n.orelse + getattr(n, "finalbody", []) + handlers)

    names = set()
    for node in top(ast.parse(Path(tasks.__file__).read_text()).body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_plugin_names_never_shadow_ultralytics():
    """No stock YAML names a plugin block or alias, and no block name or alias is a name Ultralytics' tasks module
    binds itself (read from its source, so registration cannot hide a clash)."""
    from attn_yolo.registry import ALIASES

    ours = set(attn_yolo.MODULES) | set(ALIASES)
    for p in stock_yamls():
        d = yaml_model_load(p)
        assert not ours & {row[2] for row in d["backbone"] + d["head"]}, p.name
    theirs = tasks_module_names()
    assert {"Detect", "C2PSA", "Conv", "parse_model", "DetectionModel", "torch", "A2C2f"} <= theirs  # the scan reads
    assert not set(ALIASES) & theirs
    assert not set(attn_yolo.MODULES) & theirs
    from ultralytics.nn.modules import CBAM as UltralyticsCBAM

    assert UltralyticsCBAM is not attn_yolo.CBAM and UltralyticsCBAM.__module__.startswith("ultralytics.")


def yolo11_with(rows_after: dict, **top):
    """yolo11 dict with a row inserted after backbone layer 10 (the last), so no index needs rewiring."""
    d = yaml_model_load("yolo11n.yaml")
    d.update(top)
    d["backbone"].append(rows_after)
    for row in d["head"]:  # head indices >= 11 shift by one
        f = row[0]
        row[0] = [x + 1 if x >= 11 else x for x in f] if isinstance(f, list) else f
    return d


def test_custom_width_multiple_and_max_channels():
    d = yolo11_with([-1, 1, "CBAM", [8, 3]])
    d.pop("scales"), d.pop("scale")
    d.update(depth_multiple=0.33, width_multiple=0.3, max_channels=320)
    model = DetectionModel(d, verbose=False)
    cbam = model.model[11]
    assert isinstance(cbam, attn_yolo.CBAM) and cbam.c1 == model.model[10].cv2.conv.out_channels
    assert cbam.r == 8 and cbam.k == 3
    model.eval()(torch.rand(1, 3, 96, 64))


def test_block_reads_non_previous_layer():
    """from=6 (not -1): the block takes layer 6's width, and the next row sees the block's width."""
    d = yolo11_with([6, 1, "SE", []])
    d["head"][0] = [10, 1, "nn.Upsample", [None, 2, "nearest"]]  # head reads layer 10 again, not the SE branch
    d["head"].append([11, 1, "nn.Identity", []])  # keep the SE output in the save list so it runs
    model = DetectionModel(d, verbose=False)
    assert model.model[11].c1 == model.model[6].cv2.conv.out_channels != model.model[10].cv2.conv.out_channels


def test_unknown_module_error_names_row_and_closest_match():
    d = yolo11_with([-1, 1, "CBMA", [16]])
    with pytest.raises(UnknownModuleError) as e:
        DetectionModel(d, verbose=False)
    msg = str(e.value)
    assert "row 11 (backbone): unknown module 'CBMA'" in msg and "Did you mean 'CBAM'?" in msg
    assert "SE, ECA, SAM, CBAM, MHSA" in msg
    assert isinstance(e.value, KeyError)  # still a KeyError for code that catches Ultralytics' old error


def test_unknown_module_lowercase_hint():
    d = yaml_model_load("yolo11n.yaml")
    d["head"].insert(0, [-1, 1, "mhsa", []])
    with pytest.raises(UnknownModuleError, match=r"row 11 \(head\): unknown module 'mhsa'. Did you mean 'MHSA'\?"):
        DetectionModel(d, verbose=False)


@pytest.mark.parametrize(
    "row, scale, match",
    [
        ([-1, 1, "SE", [0]], "n", r"row 11 \(scale n\) SE: r=0 is invalid; allowed: an int in 1..256"),
        ([-1, 1, "ECA", [4]], "s", r"row 11 \(scale s\) ECA: k=4 is invalid; allowed: a positive odd int"),
        ([-1, 1, "SAM", [5]], "m", r"row 11 \(scale m\) SAM: k=5 is invalid; allowed: the int 3 or 7"),
        ([-1, 1, "CBAM", [16, 9]], "l", r"row 11 \(scale l\) CBAM: k=9 is invalid; allowed: the int 3 or 7"),
        ([-1, 1, "MHSA", [3]], "n", r"row 11 \(scale n\) MHSA: heads=3 is invalid; allowed: a divisor of C=256"),
        ([-1, 1, "MHSA", [5]], "x", r"row 11 \(scale x\) MHSA: heads=5 is invalid; allowed: a divisor of C=768"),
        ([-1, 1, "EMA", [7]], "n", r"row 11 \(scale n\) EMA: factor=7 is invalid; allowed: \[1, 2, 4, 8, 16, 32, 64"),
        ([-1, 1, "ShuffleAttention", [3]], "s", r"row 11 \(scale s\) ShuffleAttention: groups=3 is invalid; allowed: "
                                                r"\[1, 2, 4, 8, 16, 32, 64, 128, 256\]"),
        ([-1, 1, "TripletAttention", [6]], "m", r"row 11 \(scale m\) TripletAttention: k=6 is invalid"),
        ([-1, 1, "CoordAtt", [0]], "l", r"row 11 \(scale l\) CoordAtt: r=0 is invalid"),
    ],
)
def test_bad_hyperparameters_name_row_and_scale(row, scale, match):
    d = yolo11_with(row, scale=scale)
    with pytest.raises(AttnBuildError, match=match):
        DetectionModel(d, verbose=False)


def test_row_must_read_one_layer():
    d = yolo11_with([[9, 10], 1, "SE", []])
    with pytest.raises(AttnBuildError, match=r"row 11 \(backbone\) SE: from=\[9, 10\]; an attention block reads one"):
        DetectionModel(d, verbose=False)


def test_yaml_dict_not_mutated():
    d = yaml_model_load(str(REPO / "models/yolo11n-cbam.yaml"))
    before = deepcopy(d)
    from ultralytics.nn import tasks

    tasks.parse_model(d, 3, verbose=False)
    tasks.parse_model(d, 3, verbose=False)  # the same dict parses twice
    assert d == before


def test_gflops_count_mhsa_attention_matmuls():
    """model.info()'s GFLOPs include MHSA, attention matmuls too (checked against torch's FlopCounterMode)."""
    base = DetectionModel("yolo11n.yaml", verbose=False).eval()
    model = DetectionModel(str(REPO / "models/yolo11n-mhsa.yaml"), verbose=False).eval()
    block = next(m for m in model.modules() if isinstance(m, MHSA))
    block.fused = False  # FlopCounterMode has no rule for the CPU flash kernel: count the explicit matmuls
    with FlopCounterMode(display=False) as fc:
        block(torch.rand(1, block.c1, 20, 20))  # P5 of a 640 image
    block.fused = True
    attention = 2 * 2 * 400 * 400 * block.c1  # QKᵀ and AV at N=400, in FLOPs
    added = (get_flops(model, 640) - get_flops(base, 640)) * 1e9
    assert fc.get_total_flops() > attention
    assert abs(added - fc.get_total_flops()) / fc.get_total_flops() < 0.02


def small_detector(block: str | None) -> dict:
    """Convs to 128, 128 and 256 channels at strides 8, 16, 32 (yolo11n's backbone widths), ``block`` after each."""
    rows = [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "Conv", [32, 3, 2]]]
    for c in (128, 128, 256):
        rows += [[-1, 1, "Conv", [c, 3, 2]]] + ([[-1, 1, block, []]] if block else [])
    levels = [3, 5, 7] if block else [2, 3, 4]
    return {"nc": 2, "backbone": rows, "head": [[levels, 1, "Detect", ["nc"]]]}


@functools.lru_cache
def small_detector_gflops() -> float:
    return get_flops(DetectionModel(small_detector(None), verbose=False), 100)


@pytest.mark.parametrize("name", NEW)
def test_gflops_count_new_blocks(name):
    """Ultralytics' get_flops (thop) counts each block within 10 % of torch's FlopCounterMode on the same image.

    FlopCounterMode counts convolutions and matrix products only; thop also counts normalisation layers (8 FLOPs per
    element with affine) when they are modules: SimAM and ShuffleAttention (elementwise only; their norms run as
    functionals) count 0 in both; NAM's BatchNorm is its module, which thop counts (8 FLOPs per element, against
    FlopCounterMode's 0). At 100×100 get_flops profiles the
    image itself; at stride multiples (640) it extrapolates from one-stride-tall proxies, which overstates any cost
    that does not grow with H·W (SE's and CBAM's too), so this checks what is counted, at an exact size.
    """
    model = DetectionModel(small_detector(name), verbose=False).eval()
    added = (get_flops(model, 100) - small_detector_gflops()) * 1e9
    blocks = [m for m in model.model if type(m) is attn_yolo.MODULES[name]]
    inputs = []
    handles = [b.register_forward_hook(lambda m, i, o: inputs.append(i[0])) for b in blocks]
    with torch.no_grad():
        model(torch.rand(1, 3, 100, 100))
    for h in handles:
        h.remove()
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        for b, x in zip(blocks, inputs):
            b(x)
    counted = fc.get_total_flops()
    if name in ("SimAM", "ShuffleAttention"):
        assert counted == added == 0
    elif name == "NAM":  # thop: 8 FLOPs per element of the BatchNorm2d module (with affine), nothing else counted
        assert counted == 0 and added == pytest.approx(sum(8 * x.numel() for x in inputs), rel=1e-9)
    else:
        assert counted > 0 and abs(added - counted) / counted < 0.10, (added, counted)


def test_fuse_keeps_blocks_working():
    model = DetectionModel(str(REPO / "models/yolo11n-cbam.yaml"), verbose=False).eval()
    x = torch.rand(1, 3, 128, 160)
    with torch.no_grad():
        before = model(x)[0]
        model.fuse(verbose=False)
        after = model(x)[0]
    assert sum(isinstance(m, attn_yolo.CBAM) for m in model.modules()) == 3
    torch.testing.assert_close(after, before, atol=1e-3, rtol=1e-3)


def test_ddp_worker_state_imports_plugin(tmp_path):
    """Ultralytics' DDP state file, unpickled in a fresh interpreter (as each worker does), knows the blocks."""
    from types import SimpleNamespace

    from ultralytics.utils.callbacks.base import get_default_callbacks
    from ultralytics.utils.dist import ddp_cleanup, generate_ddp_file

    yaml_path = str(REPO / "models/yolo11n-cbam.yaml")
    trainer = SimpleNamespace(args=SimpleNamespace(model=yaml_path), model=yaml_path, callbacks=get_default_callbacks())
    file = generate_ddp_file(trainer)
    try:
        code = (
            "import sys; from ultralytics.utils.patches import torch_load\n"
            f"state = torch_load({str(Path(file).with_suffix('.pt'))!r}, map_location='cpu')\n"
            "assert 'attn_yolo' in sys.modules, 'worker did not import attn_yolo'\n"
            "from ultralytics.nn.tasks import DetectionModel\n"
            "m = DetectionModel(state['model'], verbose=False)\n"
            "print(sum(type(x).__name__ == 'CBAM' for x in m.modules()))\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().splitlines()[-1] == "3"
    finally:
        ddp_cleanup(trainer, file)


def test_cli_modules_lists_blocks():
    out = subprocess.run(
        [sys.executable, "-m", "attn_yolo_console", "modules"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    lines = out.splitlines()
    width = max(map(len, attn_yolo.MODULES)) + 2
    for name in attn_yolo.MODULES:  # name, args, paper, aliases: one aligned column after the name
        i = next(i for i, line in enumerate(lines) if line.split(" ")[0] == name)
        assert lines[i][:width].rstrip() == name and lines[i][width] == "["
        assert lines[i + 1][:width] == " " * width and lines[i + 1][width] != " "
        aliases = [a for a, n in attn_yolo.ALIASES.items() if n == name]
        assert lines[i + 2] == " " * width + "also named: " + (", ".join(aliases) if aliases else "-")
    assert "CBAM" + " " * (width - 4) + "[r=16, k=7, init_values=None]" in out and "heads=4" in out
    assert "also named: CA, CoordAttention" in out and "also named: SA," in out
    assert "[k=adaptive, init_values=None]" in out and "[groups=adaptive, init_values=None]" in out  # None means


def test_too_many_args_refused_before_build():
    d = yolo11_with([-1, 1, "CBAM", [1024, 16, 7, 0.0, 5]])
    with pytest.raises(AttnBuildError) as e:
        DetectionModel(d, verbose=False)
    assert str(e.value) == (
        "model YAML row 11 (backbone) CBAM: args=[1024, 16, 7, 0.0, 5] has 5 values; CBAM takes at most 3: "
        "[r, k, init_values], after an optional leading channel count"
    )


def test_unknown_module_hints():
    def message(name):
        with pytest.raises(UnknownModuleError) as e:
            DetectionModel(yolo11_with([-1, 1, name, []]), verbose=False)
        return str(e.value)

    assert message("BAM") == (
        f"model YAML row 11 (backbone): 'BAM' is not an attn_yolo block (provided: {', '.join(attn_yolo.MODULES)}) "
        f"nor a module Ultralytics' YAML parser knows; aliases: {', '.join(ALIASES)}"
    )
    assert "'GCNet' is not an attn_yolo block" in message("GCNet")
    assert "Did you mean 'SEAttention'?" in message("SEAttenion")  # an alias is suggested as written
    assert "Did you mean 'nn.Upsample'?" in message("Upsample")
    assert "Did you mean 'ECA'?" in message("eca")
    assert "Did you mean" not in message("ECB")  # a 3-letter acronym one letter off is another block, not a typo
    assert "Did you mean" not in message("SM")
    assert "Model'?" not in message("SegmentationModl")  # whole models are not layers


def row_error(row) -> str:
    """The error message for ``row`` as row 11 of yolo11n (appended to the backbone)."""
    with pytest.raises((ModelYamlError, AttnBuildError)) as e:
        DetectionModel(yolo11_with(row), verbose=False)
    return str(e.value)


@pytest.mark.parametrize(
    "row, message",
    [
        ([-1, 1, "SE", 16], "model YAML row 11 (backbone) SE: args=16 is not a list; write [16]"),
        ([-1, 1, "Conv", None], "model YAML row 11 (backbone) Conv: args=None is not a list; write []"),
        ([True, 1, "SE", []], ("model YAML row 11 (backbone) SE: from=True: True is not a layer index; allowed: 0..10, "
                              "or -1..-11 counted back, or a list of those")),
        ([11, 1, "SE", []], ("model YAML row 11 (backbone) SE: from=11: 11 reads the row itself; allowed: 0..10, or "
                            "-1..-11 counted back, or a list of those")),
        ([12, 1, "Conv", [64, 3]], ("model YAML row 11 (backbone) Conv: from=12: 12 reads layer 12, a later row; "
                                   "allowed: 0..10, or -1..-11 counted back, or a list of those")),
        ([-12, 1, "SE", []], ("model YAML row 11 (backbone) SE: from=-12: -12 counts back past the first row; "
                             "allowed: 0..10, or -1..-11 counted back, or a list of those")),
        ([[-1, 30], 1, "Concat", [1]], ("model YAML row 11 (backbone) Concat: from=[-1, 30]: 30 reads layer 30, a "
                                       "later row; allowed: 0..10, or -1..-11 counted back, or a list of those")),
        ([-1, "2", "SE", []], "model YAML row 11 (backbone) SE: repeats='2' is invalid; allowed: an int >= 1"),
        ([-1, 1.5, "Conv", [64]], "model YAML row 11 (backbone) Conv: repeats=1.5 is invalid; allowed: an int >= 1"),
        ([-1, 1, "SE"], "model YAML row 11 (backbone): expected [from, repeats, module, args], got [-1, 1, 'SE']"),
    ],
)
def test_malformed_rows_refused_with_row(row, message):
    assert row_error(row) == message


def test_empty_and_rowless_yaml_refused(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "norows.yaml").write_text("nc: 80\nbackbone: []\nhead: []\n")
    with pytest.raises(ModelYamlError) as e:
        DetectionModel(str(tmp_path / "empty.yaml"), verbose=False)
    assert str(e.value) == (
        f"model YAML {str(tmp_path / 'empty.yaml')!r} is empty: it needs a non-empty 'backbone' list and a 'head' list "
        "of [from, repeats, module, args] rows (got keys: scale, yaml_file)"
    )
    with pytest.raises(ModelYamlError, match=r"norows.yaml' has no rows: it needs a non-empty 'backbone' list"):
        DetectionModel(str(tmp_path / "norows.yaml"), verbose=False)
    with pytest.raises(ModelYamlError, match=r"^model YAML is empty: "):
        tasks.parse_model({}, 3)
    from ultralytics import YOLO

    with pytest.raises(ModelYamlError, match="is empty"):
        YOLO(str(tmp_path / "empty.yaml"))


def test_cli_help_lists_tools():
    out = subprocess.run(
        [sys.executable, "-m", "attn_yolo_console", "--help"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "Tools: modules, insert, ablate, export, heatmap, bench" in out
