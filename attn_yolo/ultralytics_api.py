"""The one module that touches Ultralytics internals: private names, frame locals, globals, patches, copied rules.

Everything else in attn_yolo uses Ultralytics' public API or a function here (``tests/test_seam.py`` scans the package
for any other access). Each assumption this module makes about the installed Ultralytics is a named check in
``CONTRACT``; ``check_contract()`` runs them and raises ``ContractError`` naming every assumption that no longer holds
(``tests/test_ultralytics_contract.py`` has one test per check). Imports nothing of attn_yolo.

The touchpoints, by what they rely on:

- ``ultralytics.nn.tasks``' globals, where ``parse_model`` looks YAML names up: ``install_globals`` /
  ``remove_globals`` (a same-named Ultralytics global is kept aside and restored), ``ultralytics_globals``;
- patches, each undone by ``restore``: ``tasks.parse_model``, ``tasks._initialize_yolo_model``, the
  ``guess_model_task`` of ``ultralytics.engine.model`` (``wrap``), ``tasks.torch_safe_load`` (``weights_only``),
  the ``forward`` of Ultralytics' ``Attention`` / ``AAttn`` (``patch_class``), ``ultralytics.cfg.ARGV``
  (``run_cli``), Ultralytics' default callbacks (``add_default_callback``);
- ``parse_model``'s frame locals ``i``, ``f``, ``ch``, ``scale``: ``parse_model_row``, ``failed_row``;
- copied rules: the width rule (``scaled_width``), the special commands of Ultralytics' CLI (``special_commands``);
- attributes relied on: ``trainer.tloss`` (``epoch_losses``), ``trainer.metrics`` (``epoch_metrics``),
  ``Model.ckpt`` / ``cfg`` / ``overrides`` steering ``Model.train`` (``hold_in_memory``, ``holds_random_weights``,
  ``start_from``), ``model.pt_path`` naming the exporter's files (``model_file``, ``export_named``),
  ``Detect.shape`` (``reset_anchor_cache``), ``DetectionValidator._process_batch`` (``MatchingValidator``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import sys
import textwrap
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import torch
from ultralytics.models.yolo.detect import DetectionValidator
from ultralytics.nn import tasks


class ContractError(RuntimeError):
    """An assumption about the installed Ultralytics no longer holds; the message names it."""


# ------------------------------------------------------------------------------------------ tasks' global namespace
_INSTALLED: dict[str, object] = {}  # name -> our object, put into tasks' namespace by install_globals
_SHADOWED: dict[str, object] = {}  # name -> Ultralytics' own object of that name, set aside while ours is installed


def ultralytics_globals() -> dict:
    """Ultralytics' own names in ``ultralytics.nn.tasks`` (where ``parse_model`` looks YAML names up), as they are
    without attn_yolo: ours left out, any Ultralytics object ours shadows put back."""
    ns = {k: v for k, v in vars(tasks).items() if not (k in _INSTALLED and v is _INSTALLED[k])}
    return ns | _SHADOWED


_MISSING = object()


def install_globals(names: dict[str, object]) -> list[str]:
    """Put ``names`` into ``ultralytics.nn.tasks``' namespace; idempotent. A different object Ultralytics already
    defines under one of the names is set aside and put back by ``remove_globals``. Returns the names shadowed."""
    ns, shadowed = vars(tasks), []
    for name, obj in names.items():
        old = ns.get(name, _MISSING)
        ours = name in _INSTALLED and old is _INSTALLED[name]
        if old is not _MISSING and old is not obj and not ours:
            _SHADOWED[name] = old
            shadowed.append(name)
        ns[name] = _INSTALLED[name] = obj
    return shadowed


def remove_globals(names) -> None:
    """Undo ``install_globals`` for ``names``: remove ours, put back what each shadowed. A name that someone else
    reassigned meanwhile is left as it is."""
    ns = vars(tasks)
    for name in names:
        obj = _INSTALLED.pop(name, None)
        if obj is None or ns.get(name) is not obj:
            _SHADOWED.pop(name, None)
            continue
        if name in _SHADOWED:
            ns[name] = _SHADOWED.pop(name)
        else:
            del ns[name]


# ------------------------------------------------------------------------------------------------------- patches
_PATCHES: dict[tuple[int, str], tuple[object, str, object, bool]] = {}  # (id(owner), attr) -> (owner, attr, old, had)


def patch(owner, attr: str, value) -> None:
    """Set ``owner.attr = value``, remembering the original for ``restore`` (a second patch keeps the first
    original)."""
    key = (id(owner), attr)
    if key not in _PATCHES:
        had = attr in vars(owner)
        _PATCHES[key] = (owner, attr, vars(owner).get(attr), had)
    setattr(owner, attr, value)


def original(owner, attr: str):
    """What ``owner.attr`` was before ``patch`` (the current value if unpatched)."""
    hit = _PATCHES.get((id(owner), attr))
    return getattr(owner, attr) if hit is None else hit[2]


def restore(owner, attr: str) -> None:
    """Undo ``patch(owner, attr, ...)``; a no-op if it is not patched."""
    hit = _PATCHES.pop((id(owner), attr), None)
    if hit is None:
        return
    _, _, old, had = hit
    if had:
        setattr(owner, attr, old)
    else:
        delattr(owner, attr)


def is_patched(owner, attr: str) -> bool:
    return (id(owner), attr) in _PATCHES


def engine_model_module() -> types.ModuleType:
    """``ultralytics.engine.model``, whose own ``guess_model_task`` binding ``YOLO(yaml)`` calls."""
    from ultralytics.engine import model

    return model


WRAPPABLE = {
    "parse_model": lambda: tasks,
    "_initialize_yolo_model": lambda: tasks,
    "guess_model_task": engine_model_module,
}
"""Ultralytics functions attn_yolo wraps → the module whose binding it replaces."""


def wrap(name: str, make: Callable[[Callable], Callable]) -> None:
    """Replace the Ultralytics function ``name`` (a key of ``WRAPPABLE``) by ``make(original)``; idempotent."""
    owner = WRAPPABLE[name]()
    if not is_patched(owner, name):
        patch(owner, name, make(getattr(owner, name)))


def unwrap(name: str) -> None:
    """Undo ``wrap(name, ...)``."""
    restore(WRAPPABLE[name](), name)


def parse_model(d: dict, ch: int, verbose: bool = False):
    """``ultralytics.nn.tasks.parse_model`` as the process has it now (wrapped by attn_yolo when registered):
    ``(nn.Sequential, save list)``."""
    return tasks.parse_model(d, ch=ch, verbose=verbose)


def patch_class(cls: type, **attrs) -> None:
    """Set class attributes of an Ultralytics class (``forward`` of ``Attention``), restorable by
    ``restore_class``."""
    for k, v in attrs.items():
        patch(cls, k, v)


def restore_class(cls: type, *names: str) -> None:
    for k in names:
        restore(cls, k)


def attention_classes() -> tuple[type, type]:
    """Ultralytics' ``Attention`` (PSA, C2PSA) and ``AAttn`` (A2C2f), whose ``forward`` attn_yolo.sdpa switches."""
    from ultralytics.nn.modules.block import AAttn, Attention

    return Attention, AAttn


# ---------------------------------------------------------------------------------------- parse_model's frame locals
ROW_LOCALS = ("i", "f", "ch", "scale")
"""``parse_model`` locals read while it builds a row: row index, ``from`` field, widths so far, scale name."""


class Row(NamedTuple):
    """The YAML row ``parse_model`` is building: index ``i``, ``from`` field ``f``, widths so far, scale, locals.

    ``ch[t]`` is the built output width of layer ``t < i`` (``ch[-1]`` at row 0: the input channels); ``scale`` is
    None if the YAML has no ``scales``; ``names`` are ``parse_model``'s local variables, which Ultralytics uses to
    evaluate string args (``"nc"``).
    """

    i: int
    f: int | list
    ch: list[int]
    scale: str | None
    names: dict

    @property
    def c1(self) -> int:
        """The input width of an attention row (its ``from`` is a single index, checked by ``attn_yolo.registry``)."""
        return self.ch[self.f]


def _parse_model_code():
    return original(tasks, "parse_model").__code__


def parse_model_row() -> Row | None:
    """The YAML row Ultralytics' ``parse_model`` is building right now, or None outside ``parse_model``.

    Walks up the call stack to the frame of Ultralytics' own ``parse_model`` and reads its locals ``ROW_LOCALS``.
    ``parse_model`` calls a module it does not know as ``m(*args)``, passing no input width, and keeps the widths in
    a local list ``ch``: nothing else tells a block its input width.
    """
    code, frame = _parse_model_code(), sys._getframe(1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    if frame is None:
        return None
    loc = frame.f_locals
    return Row(i=loc["i"], f=loc["f"], ch=list(loc["ch"]), scale=loc.get("scale"), names=dict(loc))


def failed_row(tb) -> int | None:
    """Index of the row ``parse_model`` was building when the exception with traceback ``tb`` was raised, or None."""
    code, i = _parse_model_code(), None
    while tb is not None:
        if tb.tb_frame.f_code is code:
            i = tb.tb_frame.f_locals.get("i")
        tb = tb.tb_next
    return i


# ------------------------------------------------------------------------------------------------- copied rules
def scaled_width(c: int, width: float, max_channels: float) -> int:
    """The output width ``parse_model`` gives a ``Conv`` / ``C2f`` / ``C3k2`` / ... row whose YAML ``args[0]`` is
    ``c``, at width multiple ``width`` and channel cap ``max_channels``: ``make_divisible(min(c, max_channels) *
    width, 8)`` (Ultralytics' rule, copied; ``CONTRACT['width rule']`` checks it against ``parse_model``)."""
    from ultralytics.utils.ops import make_divisible

    return make_divisible(min(c, max_channels) * width, 8)


SPECIAL_COMMANDS = ("checks", "version", "settings", "cfg", "login", "logout", "copy-cfg", "solutions", "help")
"""The special first words of Ultralytics' CLI as of 8.4.190 (``yolo checks``, ...); used only where
``special_commands`` cannot read them from ``ultralytics.cfg.entrypoint``."""


@functools.cache
def special_commands() -> tuple[str, ...]:
    """The special first words of Ultralytics' own CLI (``yolo checks``, ``yolo settings``, ...), read from the
    ``special = {...}`` dict in the source of ``ultralytics.cfg.entrypoint``; ``SPECIAL_COMMANDS`` if unreadable."""
    from ultralytics import cfg

    with contextlib.suppress(OSError, TypeError, SyntaxError):
        tree = ast.parse(textwrap.dedent(inspect.getsource(cfg.entrypoint)))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                    and any(isinstance(t, ast.Name) and t.id == "special" for t in node.targets)):
                keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
                if keys:
                    return tuple(keys)
    return SPECIAL_COMMANDS


def run_cli(argv: list[str]) -> None:
    """Ultralytics' own CLI (``ultralytics.cfg.entrypoint``) on ``argv`` (without the program name). Ultralytics
    parses the ``ARGV`` it bound at import, so both it and ``sys.argv`` are set for the call and restored after."""
    from ultralytics import cfg

    saved = sys.argv, cfg.ARGV
    sys.argv = cfg.ARGV = ["attn-yolo", *argv]
    try:
        cfg.entrypoint()
    finally:
        sys.argv, cfg.ARGV = saved


# --------------------------------------------------------------------------------------------- checkpoint loading
_SAFE_LOCK = threading.Lock()  # one weights-only load at a time: it swaps a function of Ultralytics' module


@contextlib.contextmanager
def weights_only() -> Iterator[None]:
    """Make Ultralytics' checkpoint loader (``tasks.torch_safe_load``, called by ``load_checkpoint`` and so by
    ``YOLO(path)``) load weights-only for the duration, as ``ULTRALYTICS_SAFE_LOAD=1`` would for the whole process."""
    with _SAFE_LOCK:
        patch(tasks, "torch_safe_load", functools.partial(tasks.torch_safe_load, safe_only=True))
        try:
            yield
        finally:
            restore(tasks, "torch_safe_load")


# ---------------------------------------------------------------------------------------------------- callbacks
def add_default_callback(event: str, fn: Callable) -> None:
    """Add ``fn`` to Ultralytics' default callbacks for ``event`` (``ultralytics.utils.callbacks.base``), which every
    ``YOLO`` created afterwards copies; idempotent."""
    from ultralytics.utils.callbacks import base

    hooks = base.default_callbacks.setdefault(event, [])
    if fn not in hooks:
        hooks.append(fn)


def remove_default_callback(event: str, fn: Callable) -> None:
    """Undo ``add_default_callback``."""
    from ultralytics.utils.callbacks import base

    hooks = base.default_callbacks.get(event, [])
    while fn in hooks:
        hooks.remove(fn)


# ------------------------------------------------------------------------------------ trainer and model attributes
def epoch_losses(trainer) -> dict[str, float] | None:
    """The mean training losses of the epoch so far (``trainer.tloss``: box, cls, dfl, ...), or None before any."""
    tloss = getattr(trainer, "tloss", None)
    if tloss is None:
        return None
    items = tloss.items() if isinstance(tloss, dict) else enumerate(torch.as_tensor(tloss).reshape(-1).tolist())
    return {str(k): float(v) for k, v in items}


def epoch_metrics(trainer) -> dict | None:
    """The dict of the epoch's metrics that Ultralytics' loggers read at ``on_fit_epoch_end`` (``trainer.metrics``);
    entries added there are logged with the epoch. None where the trainer has none."""
    m = getattr(trainer, "metrics", None)
    return m if isinstance(m, dict) else None


def hold_in_memory(yolo, name: str) -> None:
    """Make a ``YOLO`` built from a YAML file that is gone behave as one built from an in-memory model: named
    ``name`` (the exporter writes ``<name>.onnx``), and ``train()`` builds from its model dict (``Model.load``:
    ``ckpt = {"model": model}``) with freshly seeded weights (``Model.reset_weights``: ``pretrained=False``)."""
    yolo.cfg = yolo.model_name = yolo.overrides["model"] = yolo.model.args["model"] = name
    yolo.model.yaml["yaml_file"] = name
    yolo.ckpt = {"model": yolo.model}
    yolo.overrides["pretrained"] = False


def holds_random_weights(yolo) -> bool:
    """Whether ``train()`` of a ``YOLO`` would start from random weights: built from a YAML (no ``ckpt``) or
    ``hold_in_memory`` (``pretrained=False``)."""
    return not yolo.ckpt or yolo.overrides.get("pretrained") is False


def start_from(yolo, model: torch.nn.Module, note: str, replace: bool) -> None:
    """Make ``yolo.train()`` start from the weights of ``model`` (as after ``Model.load``): drop
    ``pretrained=False``, and (``replace``, or no checkpoint yet) hold ``model`` as its checkpoint."""
    yolo.overrides.pop("pretrained", None)
    if replace or not yolo.ckpt:
        yolo.ckpt = {"model": model, "attn_yolo_transfer": note}


def model_file(yolo) -> Path:
    """The file Ultralytics' exporter names its output after: the model's ``.pt`` (``pt_path``), else its YAML."""
    m = yolo.model
    return Path(getattr(m, "pt_path", None) or getattr(m, "yaml_file", None) or m.yaml.get("yaml_file", ""))


@contextlib.contextmanager
def export_named(yolo, pt_path: Path | str) -> Iterator[None]:
    """Within the block, Ultralytics' exporter names its output after ``pt_path`` (``<stem>.onnx``,
    ``<stem>_openvino_model/``, ... beside it), as for a checkpoint at that path."""
    m = yolo.model
    saved = m.__dict__.get("pt_path")
    m.pt_path = str(pt_path)
    try:
        yield
    finally:
        if saved is None:
            del m.pt_path
        else:
            m.pt_path = saved


def reset_anchor_cache(head) -> None:
    """Make a ``Detect`` head rebuild its anchors and strides on its next forward (``Detect.shape``), e.g. inside a
    graph with gradients after a cache made under ``inference_mode``."""
    head.shape = None


class MatchingValidator(DetectionValidator):
    """Ultralytics' ``DetectionValidator`` that calls ``on_matched(preds, batch, out)`` after it matched one image's
    predictions to its boxes (``_process_batch``; ``out["tp"]``: (N, 10) bool, one column per IoU 0.50:0.95)."""

    def on_matched(self, preds: dict, batch: dict, out: dict) -> None:
        """Override: called once per image with its predictions, its batch entry and the matching."""

    def _process_batch(self, preds: dict, batch: dict) -> dict:
        out = super()._process_batch(preds, batch)
        self.on_matched(preds, batch, out)
        return out


# ------------------------------------------------------------------------------------------------------ the contract
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
    pm = original(tasks, "parse_model")
    _need(pm.__globals__ is vars(tasks) and "globals" in _code_names(pm),
          "parse_model no longer looks YAML module names up in ultralytics.nn.tasks' globals()")


class _Probe(torch.nn.Module):
    """A module ``parse_model`` does not know: records the args it got and the row context it sees."""

    seen: list = []

    def __init__(self, *args):
        super().__init__()
        _Probe.seen.append((args, parse_model_row()))


def _probe_build(d: dict, ch: int = 3):
    """Build ``d`` with Ultralytics' own ``parse_model``, ``_Probe`` resolvable by name; the probes' records."""
    ns, had = vars(tasks), "_AttnYoloProbe" in vars(tasks)
    ns["_AttnYoloProbe"], _Probe.seen = _Probe, []
    try:
        with torch.device("meta"):
            seq, _ = original(tasks, "parse_model")(d, ch=ch, verbose=False)
        return seq, list(_Probe.seen)
    finally:
        if not had:
            del ns["_AttnYoloProbe"]


def _check_row_context() -> None:
    pm = original(tasks, "parse_model")
    _need(_params(pm)[:2] == ["d", "ch"], f"parse_model(d, ch, ...) signature changed: {_params(pm)}")
    names = set(pm.__code__.co_varnames) | set(pm.__code__.co_cellvars)
    _need(set(ROW_LOCALS) <= names, f"parse_model no longer binds the locals {sorted(set(ROW_LOCALS) - names)}")
    d = {"nc": 1, "scales": {"n": [0.5, 0.25, 1024], "s": [0.5, 0.5, 1024]}, "scale": "s",
         "backbone": [[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "Conv", [128, 3, 2]], [-2, 1, "_AttnYoloProbe", [7, "nc"]]],
         "head": []}  # fmt: skip
    _, seen = _probe_build(d)
    _need(len(seen) == 1, f"parse_model built the probe row {len(seen)} times")
    args, row = seen[0]
    _need(args == (7, 1), f"parse_model no longer passes an unknown module's args verbatim (string args evaluated): "
                          f"got {args}, expected (7, 1)")
    _need(row is not None and (row.i, row.f, row.ch, row.scale) == (2, -2, [32, 64], "s"),
          f"parse_model_row() read {row and (row.i, row.f, row.ch, row.scale)}, expected (2, -2, [32, 64], 's')")


def _check_width_rule() -> None:
    scales = tasks.yaml_model_load("yolo11n.yaml")["scales"]
    table = [16, 64, 100, 256, 512, 768, 1024, 1280]
    for s, (_, w, mc) in scales.items():
        d = {"nc": 1, "scales": scales, "scale": s, "head": [],
             "backbone": [[-1, 1, "Conv", [c, 1, 1]] for c in table]}  # fmt: skip
        seq, _ = _probe_build(d)
        got = [m.conv.out_channels for m in seq]
        ours = [scaled_width(c, w, mc) for c in table]
        _need(got == ours, f"scale {s}: parse_model built widths {got}, scaled_width gives {ours}")


def _check_initialize() -> None:
    init = original(tasks, "_initialize_yolo_model")
    _need(_params(init) == ["model", "cfg", "ch", "nc", "verbose"],
          f"_initialize_yolo_model(model, cfg, ch, nc, verbose) signature changed: {_params(init)}")
    _need("_initialize_yolo_model" in _code_names(tasks.DetectionModel.__init__),
          "DetectionModel.__init__ no longer calls _initialize_yolo_model")
    _need("parse_model" in _code_names(init), "_initialize_yolo_model no longer calls parse_model by its global name")


def _check_guess_task() -> None:
    from ultralytics.engine.model import Model

    em = engine_model_module()
    _need(original(em, "guess_model_task") is tasks.guess_model_task,
          "ultralytics.engine.model no longer binds tasks.guess_model_task")
    _need("guess_model_task" in _code_names(Model._new), "Model._new (YOLO(yaml)) no longer calls guess_model_task")


def _check_safe_load() -> None:
    tsl = original(tasks, "torch_safe_load")
    _need("safe_only" in _params(tsl), f"torch_safe_load has no safe_only parameter: {_params(tsl)}")
    _need("torch_safe_load" in _code_names(tasks.load_checkpoint),
          "load_checkpoint no longer calls torch_safe_load by its global name")


def _check_cli() -> None:
    from ultralytics import cfg

    _need("ARGV" in _code_names(cfg.entrypoint), "ultralytics.cfg.entrypoint no longer parses the module global ARGV")
    special_commands.cache_clear()
    got = special_commands()
    _need(got is not SPECIAL_COMMANDS and {"checks", "settings", "help"} <= set(got),
          "the special commands are no longer readable from the `special = {...}` dict of entrypoint's source")


def _check_callbacks() -> None:
    from ultralytics.utils.callbacks import base

    d = base.default_callbacks
    _need(isinstance(d, dict) and all(isinstance(v, list) for v in d.values()) and "on_pretrain_routine_start" in d,
          "base.default_callbacks is no longer a dict of event -> list of callbacks")
    _need("default_callbacks" in _code_names(base.get_default_callbacks),
          "get_default_callbacks (what every YOLO copies) no longer reads base.default_callbacks")


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


def _check_detect_shape() -> None:
    from ultralytics.nn.modules import Detect

    src = inspect.getsource(Detect)
    _need("shape" in vars(Detect) and Detect.shape is None and "self.shape != shape" in src,
          "Detect no longer rebuilds its anchors when self.shape differs from the input's")


def _check_process_batch() -> None:
    pb = getattr(DetectionValidator, "_process_batch", None)
    _need(pb is not None and _params(pb) == ["self", "preds", "batch"],
          f"DetectionValidator._process_batch(self, preds, batch) is gone or changed: {pb and _params(pb)}")
    _need("_process_batch" in _code_names(DetectionValidator.update_metrics),
          "DetectionValidator.update_metrics no longer calls _process_batch per image")


def _check_attention() -> None:
    attention, aattn = attention_classes()
    with torch.device("meta"):
        a, b = attention(64, num_heads=2), aattn(64, num_heads=2, area=4)
    for m, keys in ((a, ("num_heads", "key_dim", "head_dim", "scale", "qkv", "pe", "proj")),
                    (b, ("area", "num_heads", "head_dim", "all_head_dim", "qkv", "pe", "proj"))):
        fwd = original(type(m), "forward")
        missing = [k for k in keys if not hasattr(m, k)]
        _need(not missing and _params(fwd) == ["self", "x"],
              f"{type(m).__name__}: forward{_params(fwd)} or attributes {missing} differ from what attn_yolo.sdpa uses")


CONTRACT: dict[str, Callable[[], None]] = {
    "parse_model looks names up in tasks' globals": _check_lookup,
    "parse_model binds i, f, ch, scale and passes unknown modules' args verbatim": _check_row_context,
    "the width rule matches parse_model": _check_width_rule,
    "_initialize_yolo_model(model, cfg, ch, nc, verbose) calls parse_model": _check_initialize,
    "YOLO(yaml) calls engine.model.guess_model_task": _check_guess_task,
    "load_checkpoint calls torch_safe_load(safe_only=)": _check_safe_load,
    "the CLI parses cfg.ARGV and its special commands are derivable": _check_cli,
    "Ultralytics' default callbacks are a dict of lists": _check_callbacks,
    "the trainer sets tloss and metrics": _check_trainer,
    "Model.train starts from ckpt and reads pretrained=False": _check_model_train,
    "the exporter names its file from model.pt_path": _check_exporter,
    "Detect rebuilds its anchors when shape differs": _check_detect_shape,
    "DetectionValidator._process_batch(preds, batch) runs per image": _check_process_batch,
    "Attention and AAttn have the forward and attributes sdpa uses": _check_attention,
}
"""Each assumption attn_yolo makes about the installed Ultralytics → a check that raises AssertionError if not."""


def check_contract(*names: str) -> None:
    """Run the ``CONTRACT`` checks ``names`` (all if none).

    Raises:
        ContractError: one line per assumption that no longer holds, each naming it and saying what differs.
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
