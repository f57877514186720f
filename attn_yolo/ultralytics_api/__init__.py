"""The one place (this package) that touches Ultralytics internals: private names, frame locals, globals, patches.

Everything else in attn_yolo uses Ultralytics' public API or a function here (``tests/test_seam.py`` scans the package
for any other access). Each assumption this module makes about the installed Ultralytics is a named check in
``CONTRACT`` of ``attn_yolo.ultralytics_api.contract``, whose ``check_contract()`` raises ``ContractError`` naming
every assumption that no longer holds (``tests/test_ultralytics_contract.py`` has one test per check). Imports nothing
of attn_yolo.

The touchpoints, by what they rely on:

- ``ultralytics.nn.tasks``' globals, where ``parse_model`` looks YAML names up: ``install_globals`` /
  ``remove_globals`` (a same-named Ultralytics global is kept aside and restored), ``ultralytics_globals``;
- patches, each undone by ``restore``: ``tasks.parse_model``, ``tasks._initialize_yolo_model``, the
  ``guess_model_task`` of ``ultralytics.engine.model`` (``wrap``), ``tasks.torch_safe_load`` (``weights_only``),
  the ``forward`` of Ultralytics' ``Attention`` / ``AAttn`` (``patch_class``), ``ultralytics.cfg.ARGV``
  (``run_cli``), Ultralytics' default callbacks (``add_default_callback``);
- ``parse_model``'s frame locals ``i``, ``f``, ``ch``, ``scale``: ``parse_model_row``, ``failed_row``;
- copied rules: the width rule (``scaled_width``), the scale-less YAML name (``unscaled_yaml_path``), the special
  commands of Ultralytics' CLI (``special_commands``); in ``attn_yolo.ultralytics_api.cli_checks``: where
  ``yaml_model_load`` finds a model YAML, how the entrypoint reads ``key=value`` arguments, the exporter's formats;
- attributes relied on: ``trainer.tloss`` (``epoch_losses``), ``trainer.metrics`` (``epoch_metrics``),
  ``Model.ckpt`` / ``cfg`` / ``overrides`` steering ``Model.train`` (``hold_in_memory``, ``holds_random_weights``,
  ``start_from``), ``model.pt_path`` naming the exporter's files (``model_file``, ``export_named``),
  ``Detect.shape`` (``reset_anchor_cache``), a trainer's ``callbacks`` lists (``add_callbacks``, ...) and its
  ``test_loader`` (``validation_images``);
- in ``attn_yolo.ultralytics_api.training``: the validator and trainer subclasses (``DetectionValidator``'s private
  ``_process_batch``, its per-image batch dict and ``scale_preds``, ``get_validator``'s private ``_callbacks=``);
- in ``attn_yolo.ultralytics_api.layers``: built layers changed in place (``become``: ``__class__``), the ``np`` /
  ``type`` records ``parse_model`` keeps on each layer (``relabel_layer``), a block's YAML args from its signature
  and ``parse_model``'s ``repeat_modules`` (``yaml_args``), an instance's ``forward`` (``instance_forward``), the
  qkv layout of ``Attention`` / ``AAttn`` (``qkv_layout``, ``split_v``), ``Detect``'s eval-mode output
  (``head_tensors``: its ``boxes`` and ``scores`` per anchor).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import re
import sys
import textwrap
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import torch
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


UNSCALED_RE = r"(\d+)([nslmx])(.+)?$"
"""How ``yaml_model_load`` finds a YAML named with a scale letter: ``re.sub(UNSCALED_RE, r"\1\3", path)``."""


def unscaled_yaml_path(path) -> str:
    """The path ``yaml_model_load`` falls back to for a model YAML named with a scale letter (``yolo11n-cbam.yaml`` ->
    ``yolo11-cbam.yaml``): Ultralytics' rule, copied, applied as Ultralytics applies it, to the whole path."""
    return re.sub(UNSCALED_RE, r"\1\3", str(path))


SPECIAL_COMMANDS = ("checks", "version", "settings", "cfg", "login", "logout", "copy-cfg", "solutions", "help")
"""The special first words of Ultralytics' CLI as of 8.4.190 (``yolo checks``, ...); used only where
``special_commands`` cannot read them from ``ultralytics.cfg.entrypoint``."""


@functools.cache
def special_commands() -> tuple[str, ...]:
    """The special first words of Ultralytics' own CLI (``yolo checks``, ``yolo settings``, ...), read from the
    ``special = {...}`` dict in the source of ``ultralytics.cfg.entrypoint``; ``SPECIAL_COMMANDS`` if unreadable."""
    from ultralytics import cfg

    from attn_yolo.ultralytics_api.words import special_keys

    with contextlib.suppress(OSError, TypeError, SyntaxError):
        if keys := special_keys(ast.parse(textwrap.dedent(inspect.getsource(cfg.entrypoint)))):
            return keys
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
def add_default_callback(event: str, fn: Callable, unique: bool = True) -> None:
    """Add ``fn`` to Ultralytics' default callbacks for ``event`` (``ultralytics.utils.callbacks.base``), which every
    ``YOLO`` created afterwards copies; with ``unique``, not if it is there already (idempotent)."""
    from ultralytics.utils.callbacks import base

    hooks = base.default_callbacks.setdefault(event, [])
    if not (unique and fn in hooks):
        hooks.append(fn)


def remove_default_callback(event: str, fn: Callable) -> None:
    """Undo one ``add_default_callback`` (a no-op if ``fn`` is not there)."""
    from ultralytics.utils.callbacks import base

    hooks = base.default_callbacks.get(event, [])
    if fn in hooks:
        hooks.remove(fn)


def add_callbacks(owner, event: str, first: tuple[Callable, ...] = (), last: tuple[Callable, ...] = ()) -> None:
    """Run ``first`` before and ``last`` after the callbacks ``owner`` (a trainer or a ``YOLO``: its ``callbacks``
    dict of event → list, run in list order by ``run_callbacks``) already runs at ``event``. The list is a new one:
    one that another owner shares (a ``YOLO``'s and its trainer's) stays as it is."""
    cb = owner.callbacks
    cb[event] = [*first, *cb.get(event, []), *last]


def has_callback(owner, event: str, fn: Callable) -> bool:
    """Whether ``owner`` (a trainer or a ``YOLO``) runs ``fn`` at ``event``."""
    cb = getattr(owner, "callbacks", None)
    return isinstance(cb, dict) and fn in cb.get(event, [])


def remove_callback(owner, event: str, fn: Callable) -> None:
    """Take ``fn`` out of ``owner``'s callbacks at ``event`` (a no-op if it is not there)."""
    cb = owner.callbacks
    if fn in cb.get(event, []):
        cb[event] = [f for f in cb[event] if f is not fn]


def validation_images(trainer) -> list[str]:
    """The image files of a trainer's validation loader (``test_loader``; its ``train_loader`` if it has none), sorted;
    empty if neither is built yet."""
    loader = getattr(trainer, "test_loader", None) or getattr(trainer, "train_loader", None)
    return sorted(getattr(getattr(loader, "dataset", None), "im_files", None) or [])


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


def boost_params(optimizer, params: set[int], lr_mult: float) -> int:
    """Give the parameters ``params`` (their ``id``) of an optimizer from Ultralytics' ``build_optimizer`` a learning
    rate ``lr_mult`` × their group's: each of its groups (``param_group`` weight / bn / bias, their options) is split
    in two, as Ultralytics' own MuSGD boost of the head's classifier does. Call it before the scheduler exists
    (``LambdaLR`` takes each group's ``lr`` as its ``initial_lr``, which warmup and the schedule scale). Returns the
    number of parameter tensors moved."""
    moved = 0
    for g in list(optimizer.param_groups):
        own = [p for p in g["params"] if id(p) in params]
        if not own:
            continue
        g["params"] = [p for p in g["params"] if id(p) not in params]
        optimizer.add_param_group({**{k: v for k, v in g.items() if k != "params"}, "params": own,
                                   "lr": g["lr"] * lr_mult})
        moved += len(own)
    return moved


def reseed(trainer) -> None:
    """An ``on_train_start`` callback of Ultralytics' trainer: seed Python's, NumPy's and torch's global generators
    again as the trainer did at its construction (``init_seeds(seed + 1 + RANK)``), right before the first batch.

    Ultralytics' augmentation (``random.random() < fliplr``, ...) draws from Python's global generator, seeded once
    when the trainer is built. Between then and the first batch, whatever else draws from it shifts every later flip:
    measured here (Ultralytics 8.4.190, MLflow installed), Ultralytics' MLflow callback starts an MLflow run, whose
    run-name generator draws from it, and a process's first run drew more than its later ones, so the same run gave
    mAP50-95 0.5820 as a process's first run and 0.5854 after another run. Seeding again here makes the augmentation
    stream a function of the seed alone."""

    from ultralytics.utils import RANK
    from ultralytics.utils.torch_utils import init_seeds

    init_seeds(trainer.args.seed + 1 + RANK, deterministic=trainer.args.deterministic)


def probe_phase(params: set[int], steps: int, lr_mult: float):
    """An ``on_train_batch_start`` callback of Ultralytics' trainer for a probe phase: for the first ``steps`` batches
    the optimizer groups holding the parameters ``params`` (their ``id``; ``boost_params`` put them in groups of their
    own) train at ``lr_mult`` × their scheduled learning rate and every other group at 0; from batch ``steps`` on, every
    group at its scheduled rate again. The scheduled rates are read at each epoch's first batch, after
    ``LambdaLR.step`` set them; warmup (``warmup_epochs`` > 0) would overwrite these rates, so the caller refuses it."""
    state = {"batch": 0, "epoch": None, "scheduled": []}

    def callback(trainer) -> None:
        groups = trainer.optimizer.param_groups
        if trainer.epoch != state["epoch"]:
            state["epoch"], state["scheduled"] = trainer.epoch, [g["lr"] for g in groups]
        n, state["batch"] = state["batch"], state["batch"] + 1
        if n > steps:
            return
        for g, lr in zip(groups, state["scheduled"]):
            own = any(id(p) in params for p in g["params"])
            g["lr"] = lr if n == steps else lr * lr_mult if own else 0.0

    return callback


def reset_anchor_cache(head) -> None:
    """Make a ``Detect`` head rebuild its anchors and strides on its next forward (``Detect.shape``), e.g. inside a
    graph with gradients after a cache made under ``inference_mode``."""
    head.shape = None


def __getattr__(name: str):
    """The validator and trainer subclasses of ``attn_yolo.ultralytics_api.training`` (``MatchingValidator``, ...),
    imported on first use (``import attn_yolo`` does not import Ultralytics' trainers and validators)."""
    if name in ("MatchingValidator", "PerImageValidator", "PerImageTrainer"):
        from attn_yolo.ultralytics_api import training

        return getattr(training, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
