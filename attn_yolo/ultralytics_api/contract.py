"""The seam's contract: each assumption about the installed Ultralytics as a named check; check_contract() runs all.

``CONTRACT`` maps a one-line statement of each assumption ``attn_yolo.ultralytics_api`` makes to a check against the
installed Ultralytics that raises ``AssertionError`` saying what differs; ``check_contract`` raises one
``ContractError`` naming every assumption that no longer holds. ``tests/test_ultralytics_contract.py`` runs each and
patches each away. Cheap (about 2 s; a few ``parse_model`` builds on the meta device, three small attention layers)::

    python -c "from attn_yolo.ultralytics_api.contract import check_contract; check_contract()"
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable

import torch
from ultralytics.nn import tasks

import attn_yolo.ultralytics_api as api
from attn_yolo.ultralytics_api import ContractError

__all__ = ["CONTRACT", "ContractError", "check_contract"]


def _code_names(fn) -> set[str]:
    """Globals and attributes a function's code names (``co_names``), its nested code objects included."""
    out, stack = set(), [fn.__code__]
    while stack:
        c = stack.pop()
        out |= set(c.co_names)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return out


def _need(ok: bool, detail: str) -> None:
    if not ok:
        raise AssertionError(detail)


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _check_lookup() -> None:
    pm = api.original(tasks, "parse_model")
    _need(pm.__globals__ is vars(tasks) and "globals" in _code_names(pm),
          "parse_model no longer looks YAML module names up in ultralytics.nn.tasks' globals()")


class _Probe(torch.nn.Module):
    """A module ``parse_model`` does not know: records the args it got and the row context it sees."""

    seen: list = []

    def __init__(self, *args):
        super().__init__()
        _Probe.seen.append((args, api.parse_model_row()))


def _probe_build(d: dict, ch: int = 3):
    """Build ``d`` with Ultralytics' own ``parse_model``, ``_Probe`` resolvable by name; the probes' records."""
    ns, had = vars(tasks), "_AttnYoloProbe" in vars(tasks)
    ns["_AttnYoloProbe"], _Probe.seen = _Probe, []
    try:
        with torch.device("meta"):
            seq, _ = api.original(tasks, "parse_model")(d, ch=ch, verbose=False)
        return seq, list(_Probe.seen)
    finally:
        if not had:
            del ns["_AttnYoloProbe"]


def _check_row_context() -> None:
    pm = api.original(tasks, "parse_model")
    _need(_params(pm)[:2] == ["d", "ch"], f"parse_model(d, ch, ...) signature changed: {_params(pm)}")
    names = set(pm.__code__.co_varnames) | set(pm.__code__.co_cellvars)
    _need(set(api.ROW_LOCALS) <= names, f"parse_model no longer binds the locals {sorted(set(api.ROW_LOCALS) - names)}")
    d = {"nc": 1, "scales": {"n": [0.5, 0.25, 1024], "s": [0.5, 0.5, 1024]}, "scale": "s",
         "backbone": [[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "Conv", [128, 3, 2]], [-2, 1, "_AttnYoloProbe", [7, "nc"]]],
         "head": []}  # fmt: skip
    _, seen = _probe_build(d)
    _need(len(seen) == 1, f"parse_model built the probe row {len(seen)} times")
    args, row = seen[0]
    _need(args == (7, 1), f"parse_model no longer passes an unknown module's args verbatim (string args evaluated): "
                          f"got {args}, expected (7, 1)")
    _need(row is not None and (row.i, row.f, row.ch, row.scale) == (2, -2, [32, 64], "s"),
          f"api.parse_model_row() read {row and (row.i, row.f, row.ch, row.scale)}, expected (2, -2, [32, 64], 's')")


def _check_width_rule() -> None:
    scales = tasks.yaml_model_load("yolo11n.yaml")["scales"]
    table = [16, 64, 100, 256, 512, 768, 1024, 1280]
    for s, (_, w, mc) in scales.items():
        d = {"nc": 1, "scales": scales, "scale": s, "head": [],
             "backbone": [[-1, 1, "Conv", [c, 1, 1]] for c in table]}  # fmt: skip
        seq, _ = _probe_build(d)
        got = [m.conv.out_channels for m in seq]
        ours = [api.scaled_width(c, w, mc) for c in table]
        _need(got == ours, f"scale {s}: parse_model built widths {got}, api.scaled_width gives {ours}")


def _check_unscaled_name() -> None:
    _need(api.UNSCALED_RE in inspect.getsource(tasks.yaml_model_load),
          "yaml_model_load no longer finds yolo11n-x.yaml as yolo11-x.yaml by re.sub(UNSCALED_RE, ...)")


def _check_initialize() -> None:
    init = api.original(tasks, "_initialize_yolo_model")
    _need(_params(init) == ["model", "cfg", "ch", "nc", "verbose"],
          f"_initialize_yolo_model(model, cfg, ch, nc, verbose) signature changed: {_params(init)}")
    _need("_initialize_yolo_model" in _code_names(tasks.DetectionModel.__init__),
          "DetectionModel.__init__ no longer calls _initialize_yolo_model")
    _need("parse_model" in _code_names(init), "_initialize_yolo_model no longer calls parse_model by its global name")


def _check_guess_task() -> None:
    from ultralytics.engine.model import Model

    em = api.engine_model_module()
    _need(api.original(em, "guess_model_task") is tasks.guess_model_task,
          "ultralytics.engine.model no longer binds tasks.guess_model_task")
    _need("guess_model_task" in _code_names(Model._new), "Model._new (YOLO(yaml)) no longer calls guess_model_task")


def _check_safe_load() -> None:
    tsl = api.original(tasks, "torch_safe_load")
    _need("safe_only" in _params(tsl), f"torch_safe_load has no safe_only parameter: {_params(tsl)}")
    _need("torch_safe_load" in _code_names(tasks.load_checkpoint),
          "load_checkpoint no longer calls torch_safe_load by its global name")


def _check_cli() -> None:
    from ultralytics import cfg

    _need("ARGV" in _code_names(cfg.entrypoint), "ultralytics.cfg.entrypoint no longer parses the module global ARGV")
    reads = {"merge_equals_args", "parse_key_value_pair", "check_dict_alignment"}
    _need(reads <= _code_names(cfg.entrypoint),
          f"entrypoint no longer reads key=value arguments with {sorted(reads)} (cli_checks.cli_overrides copies it)")
    from attn_yolo.ultralytics_api import cli_checks

    cli_checks.export_format_names.cache_clear()
    _need({"onnx", "openvino", "torchscript", "tflite"} <= set(cli_checks.export_format_names()),
          "the exporter's formats and aliases are no longer readable (export_formats, Exporter.__call__)")
    _need("check_yaml" in _code_names(tasks.yaml_model_load),
          "yaml_model_load no longer finds a model YAML with check_yaml (cli_checks.model_yaml_file copies it)")
    _need("TASK2MODEL" in _code_names(cfg.entrypoint) and "DEFAULT_CFG" in _code_names(cfg.entrypoint),
          "entrypoint no longer picks its default model from DEFAULT_CFG.model / TASK2MODEL "
          "(cli_checks.default_weights copies it)")
    from ultralytics.utils import downloads

    _need({"SETTINGS", "GITHUB_ASSETS_NAMES"} <= _code_names(downloads.attempt_download_asset),
          "attempt_download_asset no longer looks in SETTINGS['weights_dir'] before fetching GITHUB_ASSETS_NAMES "
          "(cli_checks.unreachable_asset copies it)")
    import inspect

    from ultralytics.engine.trainer import BaseTrainer

    _need(f'f"{cli_checks.DATASET_ERROR}' in inspect.getsource(BaseTrainer.get_dataset),
          f"BaseTrainer.get_dataset's errors no longer begin {cli_checks.DATASET_ERROR!r} (cli_checks.dataset_error)")
    api.special_commands.cache_clear()
    got = api.special_commands()
    _need(got is not api.SPECIAL_COMMANDS and {"checks", "settings", "help"} <= set(got),
          "the special commands are no longer readable from the `special = {...}` dict of entrypoint's source")


def _check_first_words() -> None:
    from ultralytics import cfg

    from attn_yolo.ultralytics_api import words

    got = words.first_words()
    _need(got is not None, f"MODES, TASKS, entrypoint's `special` dict or default.yaml are no longer readable from "
          f"the files under {words.ultralytics_dir()} (the console's typo check, attn_yolo_console)")
    want = {*cfg.MODES, *cfg.TASKS, *api.special_commands(), *cfg.DEFAULT_CFG_DICT}
    _need(set(got.modes) == set(cfg.MODES) and want <= got.words,
          f"the first words read from Ultralytics' files miss {sorted(want - got.words)} or its modes differ")


def _check_callbacks() -> None:
    from ultralytics.utils.callbacks import base

    d = base.default_callbacks
    _need(isinstance(d, dict) and all(isinstance(v, list) for v in d.values()) and "on_pretrain_routine_start" in d,
          "base.default_callbacks is no longer a dict of event -> list of callbacks")
    _need("default_callbacks" in _code_names(base.get_default_callbacks),
          "get_default_callbacks (what every YOLO copies) no longer reads base.default_callbacks")


def _check_loader_seed() -> None:
    from attn_yolo.ultralytics_api.loader import loader_seed_problem

    why = loader_seed_problem()
    _need(why is None, f"the training dataloader's order does not follow init_seeds(seed + 1): {why}")


def _check_trainer() -> None:
    from ultralytics.engine.trainer import BaseTrainer

    names = _code_names(BaseTrainer._do_train)
    _need({"tloss", "metrics"} <= names, f"BaseTrainer._do_train no longer sets {sorted({'tloss', 'metrics'} - names)}")


def _check_model_train() -> None:
    from ultralytics.engine.model import Model

    src = inspect.getsource(Model.train)
    _need("self.ckpt" in src and "pretrained is False" in src and "overrides" in _code_names(Model.train),
          "Model.train no longer starts from self.model while self.ckpt is set, nor reads pretrained=False")


def _check_exporter() -> None:
    from ultralytics.engine.exporter import Exporter

    _need('"pt_path"' in inspect.getsource(Exporter.__call__), "Exporter no longer names its file from model.pt_path")


def _check_int8_calls() -> None:
    import importlib

    from attn_yolo.ultralytics_api.int8 import INT8_CALLS

    for key, needs in INT8_CALLS.items():
        mod, name = key.split(":")
        src = inspect.getsource(getattr(importlib.import_module(mod), name))
        missing = [n for n in needs if n not in src]
        _need(not missing, f"{key} no longer holds {missing}: the INT8 keep-float list cannot reach its quantizer")


def _check_detect_shape() -> None:
    from ultralytics.nn.modules import Detect

    src = inspect.getsource(Detect)
    _need("shape" in vars(Detect) and Detect.shape is None and "self.shape != shape" in src,
          "Detect no longer rebuilds its anchors when self.shape differs from the input's")


def _check_detect_outputs() -> None:
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.ultralytics_api.layers import head_tensors

    model = DetectionModel("yolo11n.yaml", nc=2, verbose=False).eval()
    with torch.no_grad():
        out = model(torch.zeros(1, 3, 64, 64))
    anchors = sum((64 // int(s)) ** 2 for s in model.stride)
    boxes = [tuple(t.shape) for t in head_tensors(out, ("boxes",))]
    scores = [tuple(t.shape) for t in head_tensors(out, ("scores",))]
    _need(scores == [(1, 2, anchors)] and boxes == [(1, 4 * model.model[-1].reg_max, anchors)],
          "Detect's eval output no longer holds (y, {boxes, scores}) per anchor: attention health cannot read the "
          f"class logits (found boxes {boxes}, scores {scores})")


def _check_process_batch() -> None:
    from ultralytics.models.yolo.detect import DetectionValidator

    pb = getattr(DetectionValidator, "_process_batch", None)
    _need(pb is not None and _params(pb) == ["self", "preds", "batch"],
          f"DetectionValidator._process_batch(self, preds, batch) is gone or changed: {pb and _params(pb)}")
    _need("_process_batch" in _code_names(DetectionValidator.update_metrics),
          "DetectionValidator.update_metrics no longer calls _process_batch per image")


def _check_attention() -> None:
    attention, aattn = api.attention_classes()
    with torch.device("meta"):
        a, b = attention(64, num_heads=2), aattn(64, num_heads=2, area=4)
    for m, keys in ((a, ("num_heads", "key_dim", "head_dim", "scale", "qkv", "pe", "proj")),
                    (b, ("area", "num_heads", "head_dim", "all_head_dim", "qkv", "pe", "proj"))):
        fwd = api.original(type(m), "forward")
        missing = [k for k in keys if not hasattr(m, k)]
        _need(not missing and _params(fwd) == ["self", "x"],
              f"{type(m).__name__}: forward{_params(fwd)} or attributes {missing} differ from what attn_yolo.sdpa uses")


def _check_layer_record() -> None:
    d = {"nc": 1, "head": [], "backbone": [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "C2f", [16]]]}
    seq, _ = _probe_build(d)
    layer = seq[1]
    n = sum(p.numel() for p in layer.parameters())
    _need(getattr(layer, "np", None) == n and isinstance(getattr(layer, "type", None), str) and "C2f" in layer.type,
          f"parse_model no longer records np (parameter count) and type on each layer: "
          f"np={getattr(layer, 'np', None)} (counted {n}), type={getattr(layer, 'type', None)!r}")


def _check_csp_blocks() -> None:
    from ultralytics.nn.modules.block import SPPF, Bottleneck, C2f, C3k2

    from attn_yolo.ultralytics_api import layers

    reps = layers.repeat_modules.__wrapped__()  # read now, not the cached reading
    _need({"C2f", "C3k2"} <= reps and "SPPF" not in reps,
          f"parse_model's repeat_modules no longer holds C2f and C3k2 (and not SPPF): {sorted(reps)}")
    for cls in (C2f, C3k2):
        args = layers.yaml_args(cls)
        row = [32 if a == "c2" else False if a == "shortcut" else inspect.signature(cls).parameters[a].default
               for a in args]
        seq, _ = _probe_build({"nc": 1, "head": [], "backbone": [[-1, 1, "Conv", [32, 1, 1]], [-1, 2, cls.__name__,
                                                                                                 row]]})
        b = seq[1]
        _need(len(b.m) == 2 and all(type(m) is Bottleneck and m.add is False for m in b.m),
              f"{cls.__name__}{args}: a row's n is no longer the number of Bottlenecks, or shortcut=False not theirs")
    args = layers.yaml_args(SPPF)
    seq, _ = _probe_build({"nc": 1, "head": [], "backbone": [[-1, 1, "SPPF", [16, 3][: len(args)]]]})
    _need(args[:2] == ["c2", "k"] and seq[0].m.kernel_size == 3, f"SPPF's YAML args {args} no longer start c2, k")
    for cls, names in ((Bottleneck, {"cv1", "cv2", "add"}), (SPPF, {"cv1", "cv2", "m"})):
        _need(names <= _code_names(cls.forward) and not hasattr(cls, "__slots__"),
              f"{cls.__name__}.forward no longer reads {sorted(names)} (what attn_yolo.csp's subclasses compute with)")


def _check_qkv_layout() -> None:
    from attn_yolo.ultralytics_api.layers import instance_forward, split_v

    attention, aattn = api.attention_classes()
    torch.manual_seed(0)
    for m in (attention(64, num_heads=2), aattn(64, num_heads=2, area=1), aattn(64, num_heads=2, area=4)):
        x, seen = torch.randn(1, 64, 4, 4), []
        h = m.pe.register_forward_pre_hook(lambda mod, a, seen=seen: seen.append(a[0]))
        with torch.no_grad():
            api.original(type(m), "forward")(m, x)
            h.remove()
            ours = split_v(m, m.qkv(x))
        _need(len(seen) == 1 and torch.equal(seen[0], ours),
              f"{type(m).__name__}: the v its pe conv reads is no longer the v of qkv_layout (head-major, q | k | v)")
        with instance_forward([m], lambda self, t: t * 0):
            _need(bool((m(x) == 0).all()), "an instance's forward no longer shadows its class's (nn.Module.__call__)")


def _check_validator_batch() -> None:
    from ultralytics.engine.validator import BaseValidator
    from ultralytics.models.yolo.detect import DetectionTrainer, DetectionValidator

    from attn_yolo.ultralytics_api.training import IMAGE_KEYS

    _need(_params(BaseValidator.__init__) == ["self", "dataloader", "save_dir", "args", "_callbacks"],
          f"BaseValidator(dataloader, save_dir, args, _callbacks) changed: {_params(BaseValidator.__init__)}")
    _need({"test_loader", "save_dir", "args", "callbacks"} <= _code_names(DetectionTrainer.get_validator),
          "DetectionTrainer.get_validator no longer builds its validator from test_loader, save_dir, args, callbacks")
    tree = ast.parse(textwrap.dedent(inspect.getsource(DetectionValidator._prepare_batch)))
    keys = {k.value for n in ast.walk(tree) if isinstance(n, ast.Return) and isinstance(n.value, ast.Dict)
            for k in n.value.keys if isinstance(k, ast.Constant)}
    missing = [k for k in IMAGE_KEYS if k not in keys]
    _need(not missing, f"DetectionValidator._prepare_batch no longer returns the keys {missing}")
    _need(_params(DetectionValidator.scale_preds)[:3] == ["self", "predn", "pbatch"],
          f"DetectionValidator.scale_preds(predn, pbatch) changed: {_params(DetectionValidator.scale_preds)}")


def _check_trainer_callbacks() -> None:
    from ultralytics.data.base import BaseDataset
    from ultralytics.engine.trainer import BaseTrainer

    _need({"callbacks", "get"} <= _code_names(BaseTrainer.run_callbacks),
          "BaseTrainer.run_callbacks no longer runs self.callbacks.get(event, []) in order")
    _need("test_loader" in _code_names(BaseTrainer._build_train_pipeline) and
          "im_files" in inspect.getsource(BaseDataset.__init__),
          "the trainer no longer builds test_loader, or its dataset no longer lists im_files")


CONTRACT: dict[str, Callable[[], None]] = {
    "parse_model looks names up in tasks' globals": _check_lookup,
    "parse_model binds i, f, ch, scale and passes unknown modules' args verbatim": _check_row_context,
    "the width rule matches parse_model": _check_width_rule,
    "yaml_model_load drops the scale letter by UNSCALED_RE": _check_unscaled_name,
    "_initialize_yolo_model(model, cfg, ch, nc, verbose) calls parse_model": _check_initialize,
    "YOLO(yaml) calls engine.model.guess_model_task": _check_guess_task,
    "load_checkpoint calls torch_safe_load(safe_only=)": _check_safe_load,
    "the CLI parses cfg.ARGV and its special commands are derivable": _check_cli,
    "Ultralytics' first words are readable from its files": _check_first_words,
    "Ultralytics' default callbacks are a dict of lists": _check_callbacks,
    "the trainer sets tloss and metrics": _check_trainer,
    "Model.train starts from ckpt and reads pretrained=False": _check_model_train,
    "the exporter names its file from model.pt_path": _check_exporter,
    "the INT8 exporter calls quantize_static(nodes_to_exclude=) and nncf.quantize(ignored_scope=)": _check_int8_calls,
    "Detect rebuilds its anchors when shape differs": _check_detect_shape,
    "Detect's eval output is (y, {boxes, scores}) per anchor": _check_detect_outputs,
    "DetectionValidator._process_batch(preds, batch) runs per image": _check_process_batch,
    "Attention and AAttn have the forward and attributes sdpa uses": _check_attention,
    "parse_model records each layer's np and type": _check_layer_record,
    "C2f/C3k2/SPPF take their signature's args, n the repeats, and keep what csp's subclasses use": _check_csp_blocks,
    "Attention/AAttn lay qkv out head-major q | k | v, and an instance forward shadows the class's": _check_qkv_layout,
    "get_validator(test_loader, _callbacks=) and the per-image batch's keys and scale_preds": _check_validator_batch,
    "a trainer runs callbacks[event] in list order and lists its validation images": _check_trainer_callbacks,
    "the training dataloader's data order follows init_seeds(seed + 1)": _check_loader_seed,
}
"""Each assumption attn_yolo makes about the installed Ultralytics → a check that raises AssertionError if not."""


def check_contract(*names: str) -> None:
    """Run the ``CONTRACT`` checks ``names`` (all if none).

    Raises:
        api.ContractError: one line per assumption that no longer holds, each naming it and saying what differs.
    """
    from ultralytics import __version__

    failed = []
    for name in names or CONTRACT:
        try:
            CONTRACT[name]()
        except Exception as e:  # a check that cannot even run has broken its assumption too
            failed.append(f"- {name}: {type(e).__name__ + ': ' if not isinstance(e, AssertionError) else ''}{e}")
    if failed:
        head = f"Ultralytics {__version__} no longer matches what attn_yolo assumes:"
        raise ContractError("\n".join([head, *failed]))
