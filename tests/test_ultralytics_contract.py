"""The seam's contract with the installed Ultralytics: one test per assumption (``ultralytics_api.contract.CONTRACT``),
and for each, the assumption patched away makes ``check_contract`` fail with a message naming it."""

from __future__ import annotations

import re
import types

import pytest
from ultralytics.nn import tasks

from attn_yolo import ultralytics_api as api
from attn_yolo.ultralytics_api.contract import CONTRACT, ContractError, check_contract


@pytest.mark.parametrize("name", list(CONTRACT))
def test_assumption_holds(name):
    check_contract(name)


def _fake_original(monkeypatch, attr: str, value) -> None:
    """Make the seam see ``value`` as Ultralytics' own ``attr`` (as if a release had changed it)."""
    real = api.original
    monkeypatch.setattr(api, "original", lambda owner, a: value if a == attr else real(owner, a))


def _renamed_local(fn, old: str, new: str):
    """``fn`` with its local ``old`` renamed ``new``: the same code, as if Ultralytics renamed the variable."""
    code = fn.__code__
    code = code.replace(co_varnames=tuple(new if v == old else v for v in code.co_varnames),
                        co_cellvars=tuple(new if v == old else v for v in code.co_cellvars))
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def _break_lookup(mp):
    def parse_model(d, ch, verbose=True):  # looks names up elsewhere (this module's namespace)
        return None

    _fake_original(mp, "parse_model", parse_model)


def _break_row_context(mp):
    _fake_original(mp, "parse_model", _renamed_local(api.original(tasks, "parse_model"), "f", "from_"))


def _break_width_rule(mp):
    mp.setattr(tasks, "make_divisible", lambda x, divisor: int(x))  # a release that stops rounding to 8


def _break_unscaled_name(mp):
    def yaml_model_load(path):  # a release that resolves scale letters another way
        return {"yaml_file": str(path)}

    mp.setattr(tasks, "yaml_model_load", yaml_model_load)


def _break_initialize(mp):
    _fake_original(mp, "_initialize_yolo_model", lambda model, cfg, ch: None)


def _break_guess_task(mp):
    _fake_original(mp, "guess_model_task", lambda cfg: "detect")


def _break_safe_load(mp):
    _fake_original(mp, "torch_safe_load", lambda weight: None)


def _break_cli(mp):
    from ultralytics import cfg

    def entrypoint(debug=""):  # parses its argument only, no `special = {...}` dict
        return debug.split()

    mp.setattr(cfg, "entrypoint", entrypoint)


def _break_first_words(mp):
    from attn_yolo.ultralytics_api import words

    mp.setattr(words, "SPECIAL_DICT", "commands")  # a release that renames entrypoint's dict


def _break_callbacks(mp):
    from ultralytics.utils.callbacks import base

    mp.setattr(base, "default_callbacks", {})


def _break_trainer(mp):
    from ultralytics.engine.trainer import BaseTrainer

    def _do_train(self, world_size=1):
        self.loss_items = None  # a release that keeps the epoch's loss under another name

    mp.setattr(BaseTrainer, "_do_train", _do_train)


def _break_model_train(mp):
    from ultralytics.engine.model import Model

    def train(self, trainer=None, **kwargs):
        return self.trainer  # a release that always rebuilds from the YAML

    mp.setattr(Model, "train", train)


def _break_exporter(mp):
    from ultralytics.engine.exporter import Exporter

    def __call__(self, model=None):
        return str(model.yaml_file)  # names its file from the YAML only

    mp.setattr(Exporter, "__call__", __call__)


def _break_detect_shape(mp):
    from ultralytics.nn.modules import Detect

    mp.delattr(Detect, "shape")


def _break_process_batch(mp):
    from ultralytics.models.yolo.detect import DetectionValidator

    mp.setattr(DetectionValidator, "_process_batch", lambda self, preds, batch, iou: {})


def _break_int8_calls(mp):
    from ultralytics.utils.export import onnx as exporter_onnx

    def onnx_int8_quantize(onnx_file, output_file, dataset, transform_fn, input_name="images", prefix=""):
        return str(output_file)  # a release that quantizes some other way: the keep-float list would be ignored

    mp.setattr(exporter_onnx, "onnx_int8_quantize", onnx_int8_quantize)


def _break_attention(mp):
    _fake_original(mp, "forward", lambda self, x, mask: x)


def _break_layer_record(mp):
    real = api.original(tasks, "parse_model")

    def parse_model(d, ch, verbose=True):  # a release that no longer records np / type on the layers
        seq, save = real(d, ch=ch, verbose=verbose)
        for m in seq:
            del m.np, m.type
        return seq, save

    _fake_original(mp, "parse_model", parse_model)


def _break_csp_blocks(mp):
    real = api.original(tasks, "parse_model")

    def parse_model(d, ch, verbose=True):  # no `repeat_modules = frozenset({...})` in its source
        return real(d, ch=ch, verbose=verbose)

    _fake_original(mp, "parse_model", parse_model)


def _break_qkv_layout(mp):
    attention, _ = api.attention_classes()
    real = api.original(attention, "forward")

    def forward(self, x):  # a release that puts v first in each head
        B, C, H, W = x.shape
        qkv = self.qkv(x).view(B, self.num_heads, -1, H * W)
        v = qkv[:, :, : self.head_dim].reshape(B, C, H, W)
        self.pe(v)
        return real(self, x)

    _fake_original(mp, "forward", forward)


def _break_detect_outputs(mp):
    from ultralytics.nn.modules import Detect

    real = Detect.forward

    def forward(self, x):  # a release whose eval output is the decoded tensor alone
        out = real(self, x)
        return out[0] if isinstance(out, tuple) else out

    mp.setattr(Detect, "forward", forward)


def _break_validator_batch(mp):
    from ultralytics.models.yolo.detect import DetectionValidator

    def _prepare_batch(self, si, batch):  # a release that renames the image's file key
        return {"cls": 0, "bboxes": 0, "ori_shape": 0, "imgsz": 0, "ratio_pad": 0, "file": batch["im_file"][si]}

    mp.setattr(DetectionValidator, "_prepare_batch", _prepare_batch)


def _break_trainer_callbacks(mp):
    from ultralytics.engine.trainer import BaseTrainer

    def run_callbacks(self, event):  # a release that keeps its callbacks elsewhere
        for cb in self.hooks[event]:
            cb(self)

    mp.setattr(BaseTrainer, "run_callbacks", run_callbacks)


def _break_loader_seed(monkeypatch):
    """A loader whose generator ignores the seed (earlier 8.4.x builds): every seed, one data order."""
    import torch
    import ultralytics.data.build as build

    original = build.build_dataloader

    def constant(*args, **kwargs):
        torch.manual_seed(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(build, "build_dataloader", constant)


BREAK = {
    "parse_model looks names up in tasks' globals": _break_lookup,
    "parse_model binds i, f, ch, scale and passes unknown modules' args verbatim": _break_row_context,
    "the width rule matches parse_model": _break_width_rule,
    "yaml_model_load drops the scale letter by UNSCALED_RE": _break_unscaled_name,
    "_initialize_yolo_model(model, cfg, ch, nc, verbose) calls parse_model": _break_initialize,
    "YOLO(yaml) calls engine.model.guess_model_task": _break_guess_task,
    "load_checkpoint calls torch_safe_load(safe_only=)": _break_safe_load,
    "the CLI parses cfg.ARGV and its special commands are derivable": _break_cli,
    "Ultralytics' first words are readable from its files": _break_first_words,
    "Ultralytics' default callbacks are a dict of lists": _break_callbacks,
    "the trainer sets tloss and metrics": _break_trainer,
    "Model.train starts from ckpt and reads pretrained=False": _break_model_train,
    "the exporter names its file from model.pt_path": _break_exporter,
    "Detect rebuilds its anchors when shape differs": _break_detect_shape,
    "Detect's eval output is (y, {boxes, scores}) per anchor": _break_detect_outputs,
    "DetectionValidator._process_batch(preds, batch) runs per image": _break_process_batch,
    "Attention and AAttn have the forward and attributes sdpa uses": _break_attention,
    "parse_model records each layer's np and type": _break_layer_record,
    "C2f/C3k2/SPPF take their signature's args, n the repeats, and keep what csp's subclasses use": _break_csp_blocks,
    "Attention/AAttn lay qkv out head-major q | k | v, and an instance forward shadows the class's": _break_qkv_layout,
    "get_validator(test_loader, _callbacks=) and the per-image batch's keys and scale_preds": _break_validator_batch,
    "a trainer runs callbacks[event] in list order and lists its validation images": _break_trainer_callbacks,
    "the INT8 exporter calls quantize_static(nodes_to_exclude=) and nncf.quantize(ignored_scope=)": _break_int8_calls,
    "the training dataloader's data order follows init_seeds(seed + 1)": _break_loader_seed,
}


def test_every_assumption_has_a_breaking_test():
    assert set(BREAK) == set(CONTRACT)


@pytest.mark.parametrize("name", list(CONTRACT))
def test_a_broken_assumption_fails_naming_it(name, monkeypatch):
    try:
        BREAK[name](monkeypatch)
        with pytest.raises(ContractError) as e:
            check_contract()
    finally:
        monkeypatch.undo()
        api.special_commands.cache_clear()
    failed = re.findall(r"^- (.+?): ", str(e.value), flags=re.M)
    assert name in failed, str(e.value)
    assert str(e.value).startswith("Ultralytics "), "the message names the installed version"
    check_contract(name)  # restored


def test_row_context_breaks_the_width_path_with_the_contract_named(monkeypatch):
    """With ``f`` renamed in parse_model, the check names that local, and building a block from a row fails."""
    _break_row_context(monkeypatch)
    with pytest.raises(ContractError, match=r"no longer binds the locals \['f'\]"):
        check_contract("parse_model binds i, f, ch, scale and passes unknown modules' args verbatim")


def _fake_ultralytics(root, special: str):
    """A package folder laid out as Ultralytics' (cfg/__init__.py with MODES, TASKS and entrypoint's ``special``
    dict; cfg/default.yaml), as a later release might write it."""
    (root / "cfg").mkdir(parents=True)
    (root / "cfg" / "__init__.py").write_text(
        'MODES = frozenset({"train", "val"})\nTASKS = ("detect",)\n\n\ndef entrypoint(debug=""):\n'
        f"    special = {{{special}}}\n")
    (root / "cfg" / "default.yaml").write_text("epochs: 100\nverbose: true\n")
    return root


def test_special_commands_are_read_from_ultralytics(tmp_path, monkeypatch):
    """The special commands are read from Ultralytics (its source and files, the console without importing it) and
    equal the copy for this version; a command a later Ultralytics adds reaches Ultralytics instead of exit 2."""
    import attn_yolo_console as console
    from attn_yolo.ultralytics_api import words

    api.special_commands.cache_clear()
    derived = api.special_commands()
    assert derived == api.SPECIAL_COMMANDS and derived is not api.SPECIAL_COMMANDS
    assert set(derived) <= console.ultralytics_words().words
    assert "attn-yolo: unknown command 'newcmd'" in console.unknown_command("newcmd")

    later = words.first_words(_fake_ultralytics(tmp_path / "ultralytics", "'checks': 1, 'newcmd': 2"))
    assert later.modes == ("train", "val")
    assert {"newcmd", "n", "checks", "check", "c", "epochs", "verbose"} <= later.words
    monkeypatch.setattr(console, "ultralytics_words", lambda: later)
    assert console.unknown_command("newcmd") is None  # goes to Ultralytics' CLI
    assert "Did you mean 'attn-yolo val'?" in console.unknown_command("vall")


def test_unscaled_yaml_path():
    assert api.unscaled_yaml_path("models/yolo11n-cbam.yaml") == "models/yolo11-cbam.yaml"
    assert api.unscaled_yaml_path("yolov8s.yaml") == "yolov8.yaml"


def test_width_rule_table():
    """``scaled_width`` against hand-computed widths (yolo11 scales n, m, x: width 0.25/1.0/1.5, cap 1024/512/512)."""
    table = {(64, 0.25, 1024): 16, (1024, 0.25, 1024): 256, (100, 0.25, 1024): 32, (1024, 1.0, 512): 512,
             (768, 1.5, 512): 768, (256, 1.5, 512): 384, (1280, 0.25, 1024): 256}
    assert {k: api.scaled_width(*k) for k in table} == table
