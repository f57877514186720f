"""The ``attn-yolo`` command lines with the blocks registered: Ultralytics' own CLI, attn-yolo's keys, one-line errors.

The console script (``attn_yolo_console``, outside the package so that help and typos answer before torch loads)
hands every command line here: a tool's entry (``attn_yolo_console.TOOLS``) or Ultralytics' own CLI
(``passthrough``), with attn-yolo's errors said in one line (exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

from attn_yolo.args import Key, Schema, UsageError, batch_problem, imgsz_problem

MODULES_SCHEMA = Schema()
"""``attn-yolo modules`` takes no keys."""


def modules_main(argv: list[str]) -> int:
    """Print every attention block with its YAML name, hyperparameters and defaults, and its paper."""
    from attn_yolo.registry import DECLARATIONS

    MODULES_SCHEMA.parse([a for a in argv if a not in ("help", "-h", "--help")], "modules")

    decls = [d for d in DECLARATIONS.values() if not d.control]
    width = max(len(d.name) for d in decls) + 2  # one column for the longest name (ShuffleAttention, ...)
    for d in decls:
        args = ", ".join(f"{p.name}={p.none_means or p.default!s}" for p in d.params)
        title = (d.cls.__doc__ or "").strip().splitlines()[0]
        print(f"{d.name:<{width}}[{args}]\n{'':<{width}}{title}")
        print(f"{'':<{width}}also named: {', '.join(d.aliases) if d.aliases else '-'}")
    print("\nYAML: [-1, 1, NAME, [args in the order above]]; input channels are inferred from the layer the row reads"
          " (a leading channel count, as other attention code writes it, is read as such).")
    print("\nInside Ultralytics' own blocks (attn_yolo.csp): C2f_<X>, C3k2_<X>, SPPF_<X> for every X above: X in every"
          " bottleneck, x + X(cv2(cv1(x))), or before SPPF's cv2.\nYAML: the block's own args, then X's keywords as an"
          " optional mapping: [-1, 2, C3k2_CBAM, [256, False, 0.25, {r: 8}]]; insert: attn-yolo insert"
          " base=yolo11n.yaml module=C3k2_CBAM at=backbone pretrained=...")
    return 0


CHECKPOINT_KEYS = ("model", "pretrained")  # pass-through arguments that name a checkpoint Ultralytics will load


OWN_SCHEMA = Schema([
    Key("trust", "bool", False, help="True: load checkpoints with a full unpickle, for files you trust"),
    Key("health", "bool", True, help="attention health per epoch of training (gates.csv, gates.png, a stop at NaN)"),
    Key("sdpa", "bool", False, help="True: Ultralytics' own Attention and AAttn layers run on fused "
        "scaled_dot_product_attention"),
])
"""attn-yolo's own keys of the pass-through commands (``attn-yolo train|val|predict|export ...``), beside all of
Ultralytics' own arguments."""
OWN_KEYS = OWN_SCHEMA.defaults()


def command_name(argv: list[str]) -> str:
    """``attn-yolo <mode>`` for a pass-through command line (its mode word or ``mode=``), the start of its errors."""
    from ultralytics.cfg import MODES

    mode = next((w for w in argv if w in MODES), None)
    mode = mode or next((w.partition("=")[2] for w in argv if w.startswith("mode=")), None)
    return f"attn-yolo {mode}" if mode else "attn-yolo"


def take_flag(argv: list[str], key: str, default: bool | None, meaning: str,
              name: str = "attn-yolo") -> tuple[list[str], bool | None]:
    """Take one of attn-yolo's own ``key=True|False`` arguments (``trust``, ``health``, ``sdpa``) out of a
    pass-through command line, since Ultralytics' CLI has no such key: ``(the rest, the value or default)``.

    Raises:
        UsageError: ``key=`` with another value than True or False.
    """
    rest, value = [], default
    for tok in argv:
        k, eq, v = tok.partition("=")
        if not (eq and k == key):
            rest.append(tok)
        elif v.lower() in ("true", "false"):
            value = v.lower() == "true"
        else:
            raise UsageError(f"{name}: {key}: {v!r}; expected True or False ({meaning})")
    return rest, value


def check_args(argv: list[str], name: str = "attn-yolo") -> None:
    """Check a pass-through command line before anything runs, with Ultralytics' own checks: every ``key=value`` as
    its entrypoint checks it (a known key, with similar-key hints that include attn-yolo's ``OWN_KEYS``; the value's
    type and range, ``check_cfg``; ``imgsz`` and ``batch`` in the tools' ranges, ``attn_yolo.args``), then the files it
    names: a ``model=`` YAML where ``yaml_model_load`` would look
    (the name as written, then without its scale letter), a ``data=`` / ``cfg=`` YAML where ``check_yaml`` would.

    Raises:
        UsageError: ``attn-yolo train: 'spda' is not a valid YOLO argument. Similar arguments are i.e.
            ['sdpa=False'].``,
            ``attn-yolo train: 'epochs=abc' is of invalid type str. ...``, ``attn-yolo train: model='m/x.yaml': no such
            file ...``.
    """
    from ultralytics.utils.checks import check_yaml

    from attn_yolo.ultralytics_api import unscaled_yaml_path
    from attn_yolo.ultralytics_api.cli_checks import cli_overrides, model_yaml_file

    try:
        overrides = cli_overrides(argv, OWN_KEYS)
    except (SyntaxError, TypeError, ValueError) as e:
        raise UsageError(f"{name}: {one_line(e)}") from None
    imgsz = overrides.get("imgsz", 640)
    imgsz = imgsz[0] if isinstance(imgsz, (list, tuple)) and len(imgsz) == 1 else imgsz  # [640], as check_imgsz reads
    for key, why in (("imgsz", imgsz_problem(imgsz, pair=True)), ("batch", batch_problem(overrides.get("batch", 16)))):
        if why:  # ranges Ultralytics' check_cfg leaves open (it would train at imgsz=-64)
            raise UsageError(f"{name}: {key}: {overrides[key]!r}; expected {why}")

    def local_yaml(key: str) -> str | None:
        v = overrides.get(key)
        return v if isinstance(v, str) and v.lower().endswith((".yaml", ".yml")) and "://" not in v else None

    if (model := local_yaml("model")) and not model_yaml_file(model):
        bare = unscaled_yaml_path(model)
        also = f" (nor {bare!r}, the name without its scale letter, where Ultralytics also looks)" * (bare != model)
        raise UsageError(f"{name}: model={model!r}: no such file{also}; give a model YAML (e.g. yolo11n.yaml, "
                         "models/yolo11-cbam.yaml) or a checkpoint (*.pt)")
    for key, what in (("data", "a dataset YAML (e.g. path/to/data.yaml)"), ("cfg", "a YAML of Ultralytics arguments")):
        if (value := local_yaml(key)) and not check_yaml(value, hard=False):
            raise UsageError(f"{name}: {key}={value!r}: no such file; give {what}")


def check_dataset(argv: list[str], name: str = "attn-yolo") -> None:
    """A ``train`` / ``val`` command's ``data=`` YAML as Ultralytics' own dataset check reads it, before anything runs
    (``cli_checks.dataset_problem``: its image folders there, or Ultralytics' to download).

    Raises:
        UsageError: ``attn-yolo train: data='d.yaml' is not usable: Dataset 'd.yaml' images not found, missing path
            '.../images/val'``.
    """
    from attn_yolo.ultralytics_api.cli_checks import dataset_problem

    data = next((t.partition("=")[2] for t in argv if t.startswith("data=")), "")
    if name in ("attn-yolo train", "attn-yolo val") and data.lower().endswith((".yaml", ".yml")) and \
            (why := dataset_problem(data)):
        raise UsageError(f"{name}: data={data!r} is not usable: {why}")


def check_checkpoints(argv: list[str], name: str = "attn-yolo") -> None:
    """Load each existing ``model=`` / ``pretrained=`` checkpoint of a pass-through command weights-only (the tools'
    loader, ``checkpoint.load_yolo``) before Ultralytics sees it, so a crafted file is refused in one line naming the
    global it references, before anything runs.

    Raises:
        UsageError: ``model='evil.pt': refused to load: the checkpoint references posix.system, ...``, or a ``.pt``
            that does not exist (and is not an official Ultralytics name, which Ultralytics fetches).
    """
    from ultralytics.utils.downloads import GITHUB_ASSETS_NAMES

    from attn_yolo.checkpoint import load_yolo

    for tok in argv:
        key, _, value = tok.partition("=")
        if key not in CHECKPOINT_KEYS or not value.lower().endswith(".pt"):
            continue
        if Path(value).is_file():
            load_yolo(value, what=key, error=UsageError, suffixes=(".pt",))
        elif value not in GITHUB_ASSETS_NAMES:  # an official name (yolo11n.pt) is Ultralytics' to fetch
            raise UsageError(f"{name}: {key}={value!r}: no such file (give a checkpoint, e.g. "
                             "runs/detect/train/weights/best.pt)")


def user_errors() -> tuple[type[Exception], ...]:
    """Errors that carry a message for the user (a bad YAML row, block argument, key or file): one line, exit 2."""
    from attn_yolo.health import NonFiniteAttentionError
    from attn_yolo.nn.common import AttnBuildError
    from attn_yolo.registry import ModelYamlError, UnknownModuleError

    return UsageError, UnknownModuleError, ModelYamlError, AttnBuildError, NonFiniteAttentionError


def one_line(e: BaseException) -> str:
    """An exception's message on one line (a ``KeyError`` subclass's without its quotes)."""
    text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(str(text).split())


def synthetic_data(argv: list[str], name: str = "attn-yolo") -> list[str]:
    """``data=synthetic`` (or another of the embedded generator's settings, ``data=synthetic-key``, ...) on a
    pass-through command line → that dataset's YAML in its cache (``attn_yolo.synthetic.default_data_yaml``, generated
    on first use): the copy ``attn-yolo ablate`` uses, never a second one under Ultralytics' ``datasets_dir``.

    Raises:
        UsageError: a ``data=synthetic-...`` that names no setting and no file (the message lists the settings).
    """
    from attn_yolo import synthetic

    def resolved(tok: str) -> str:
        key, _, value = tok.partition("=")
        if key != "data" or not value.startswith(synthetic.ALIAS) or Path(value).exists():
            return tok
        try:
            setting = synthetic.setting(value)
        except ValueError:
            raise UsageError(f"{name}: data={value!r}: no such file or setting; expected a dataset YAML or one of "
                             f"{', '.join((synthetic.ALIAS, *synthetic.SETTINGS))}") from None
        return f"data={synthetic.default_data_yaml(setting)}"

    return [resolved(tok) for tok in argv]


def check_weights_reachable(argv: list[str], name: str = "attn-yolo") -> None:
    """Refuse, before anything runs, a command that would make Ultralytics download weights where it cannot
    (offline, ``YOLO_OFFLINE=1``; ``cli_checks.unreachable_asset``): an official ``model=`` / ``pretrained=`` name
    (``yolo11n.pt``) not on disk, or, with no ``model=`` at all, the default Ultralytics would load instead.

    Raises:
        UsageError: ``attn-yolo train: model= not given: Ultralytics would load its default 'yolo26n.pt', which ...``.
    """
    from attn_yolo.ultralytics_api.cli_checks import default_weights, unreachable_asset

    given = dict(tok.partition("=")[::2] for tok in argv if "=" in tok)
    named = [(k, given[k]) for k in CHECKPOINT_KEYS if isinstance(given.get(k), str)]
    if "model" not in given and command_name(argv) != "attn-yolo":
        named.append(("model", default_weights(given)))
    for key, value in named:
        if not unreachable_asset(value):
            continue
        what = f"{key}= not given: Ultralytics would load its default {value!r}" if key not in given else \
            f"{key}={value!r}"
        raise UsageError(f"{name}: {what}, which is not on this machine and cannot be downloaded here (offline); "
                         "give a model YAML (model=yolo11n.yaml, models/yolo11-cbam.yaml) or a checkpoint on disk")


def passthrough(argv: list[str]) -> int:
    """Ultralytics' own CLI (``train``, ``val``, ``predict``, ...) with the blocks registered, checkpoints loaded
    weights-only unless ``trust=True``, attention health per epoch of training unless ``health=False``, Ultralytics'
    attention on SDPA with ``sdpa=True``, ``data=synthetic`` the embedded dataset, Ray Tune's
    warning silenced, and attn-yolo's errors as one line (exit 2).

    Raises:
        UsageError: a bad ``trust=`` / ``health=`` / ``sdpa=`` value, ``health=`` outside training, an argument
            Ultralytics' checks refuse or a file it names that does not exist (``check_args``), a refused checkpoint.
    """
    from contextlib import ExitStack

    from attn_yolo import sdpa as fused
    from attn_yolo.ablate.runs.console import quiet_ray_tune
    from attn_yolo.checkpoint import weights_only
    from attn_yolo.health import default_on
    from attn_yolo.ultralytics_api import run_cli
    from attn_yolo.ultralytics_api.cli_checks import dataset_error

    name = command_name(argv)
    flags = {}
    for k in OWN_SCHEMA:  # health: None when not given (training only)
        argv, flags[k.name] = take_flag(argv, k.name, None if k.name == "health" else k.default, k.help, name)
    trust, health, sdpa = flags["trust"], flags["health"], flags["sdpa"]
    training = "train" in argv or "mode=train" in argv
    if health and not training:
        raise UsageError(f"{name}: health= applies to training only (attn-yolo train ...)")
    check_args(argv, name)
    check_weights_reachable(argv, name)
    argv = synthetic_data(argv, name)  # generated on first use: after every check
    if not trust:
        check_checkpoints(argv, name)
    check_dataset(argv, name)
    quiet_ray_tune()
    with ExitStack() as stack:
        if not trust:
            stack.enter_context(weights_only())
        if training and health is not False:
            stack.enter_context(default_on())  # gates.csv, gates.png, a stop at NaN/inf in a block
        if sdpa:  # this process, and DDP workers through the trainer's callbacks (attn_yolo.sdpa)
            stack.callback(fused.set_default, fused.is_default())
            stack.callback(fused.register_default_callbacks, False)
            fused.set_default(True)
            fused.register_default_callbacks(True)
        try:
            run_cli(argv)
        except (RuntimeError, OSError) as e:  # the dataset gone since the checks above: one line, not a traceback
            if (why := dataset_error(e)) is None:
                raise
            raise UsageError(f"{name}: {why} (it was usable when the command started)") from None
    return 0


def run(argv: list[str], tool=None) -> int:
    """Run a command line with the blocks registered: ``tool`` (an ``attn_yolo_console.Tool``) on the arguments after
    its name, or Ultralytics' own CLI (``passthrough``). attn-yolo's errors are said in one line (exit 2); Ctrl-C
    and SIGTERM outside an ablation's own handling exit 130 and 143."""
    try:
        return tool.run(argv[1:]) if tool is not None else passthrough(argv)
    except user_errors() as e:
        print(f"error: {e if isinstance(e, UsageError) else one_line(e)}", file=sys.stderr)  # a config: a line each
        return 2
    except KeyboardInterrupt as e:  # e.g. while a dataset is generated
        term = e.args == ("SIGTERM",)  # raised by attn_yolo.ablate.runs.scheduling.stop_on_signals
        print(f"\nattn-yolo {argv[0] if argv else ''}: {'terminated (SIGTERM)' if term else 'interrupted (Ctrl-C)'};"
              " nothing half-written is kept", file=sys.stderr)
        return 143 if term else 130
