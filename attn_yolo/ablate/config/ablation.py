"""The ablation config: the embedded default, its keys, its validated form (``Ablation``), loading and overrides."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from attn_yolo.args import Key, Schema, UsageError, yaml_syntax_problem
from attn_yolo.text import did_you_mean

if TYPE_CHECKING:  # the fields' types, for annotations only: design and stats import this module (no cycle)
    from attn_yolo.ablate.config.design import Start
    from attn_yolo.ablate.statistics.sequential import SeedRule
    from attn_yolo.ablate.statistics.treatment import NewBlocks, Treatment

# The default ablation (`attn-yolo ablate` without a config). configs/ablation/synthetic-quick.yaml is this text.
DEFAULT_CONFIG_NAME = "synthetic-quick"
DEFAULT_CONFIG_YAML = """\
# Quick default ablation: does CBAM (channel + spatial attention) help yolo11n on data where attention is needed?
# `attn-yolo ablate` (no config) runs this; it is embedded in attn_yolo/ablate/config/ablation.py, so it also works
# outside the repository. Data: synthetic-key, where a small key marker anywhere in the image decides which shapes are
# targets, a cue a global channel gate reads in one step (on the plain synthetic-shapes no schedule within this budget
# made CBAM's gates matter: BENCHMARKS.md, section 12). Design: shared initialisation. Each seed's arms start from
# yolo11n initialised with that seed and untrained, the baseline as it is and + CBAM inserted with every weight
# carried (γ = 1: the paper's block), so a pair differs only in the block, which trains with the model from step 0:
# 3 epochs per arm, paired seed by paired seed until the stopping rule decides (3 to 6 seeds); the attention check
# then says whether CBAM's gates mattered to its model enough for a verdict. Budget: about 10 minutes on 2 CPU cores.
data: synthetic-key  # attn_yolo.synthetic: 4 shape classes on clutter, generated on first use (no download); the
                     # old default's data without the key: data=synthetic-shapes (configs/ablation/shapes-warm.yaml)
variants:
  - {name: baseline, model: yolo11n.yaml}
  - {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone, args: [16, 7]}  # CBAM after backbone P3/P4/P5
start: init  # each seed's untrained yolo11n, shared by its arms (out/start-init/)
seeds: {min: 3, max: 6}  # paired seeds chosen by the data (alpha-spending stopping rule; a list is a fixed design)
new_blocks: {lr_mult: 1.0, gamma: 1.0}  # the inserted CBAM is the whole block from step 0 (BENCHMARKS.md, 12.5)
devices: [cpu, cpu]  # two worker processes, one run each at a time: Ultralytics trains on one CPU thread, so the two
                     # arms of a seed use both cores. On a GPU: devices=0 (or [0, 1]).
train:  # Ultralytics train arguments of every arm (= attn_yolo.synthetic.QUICK_TRAIN_ARGS with 3 epochs)
  epochs: 3
  imgsz: 128
  batch: 8
  nbs: 8
  optimizer: AdamW
  lr0: 0.003
  warmup_epochs: 0.3
  mosaic: 0.0
  close_mosaic: 0
  scale: 0.0
  translate: 0.0
  hsv_h: 0.0
  hsv_s: 0.0
  hsv_v: 0.0
  val: false  # validated once, after the last epoch
  plots: false
latency: {repeats: 50, warmup: 10}
"""

# The default before the key data: the warm start on the plain shapes, whose CBAM the attention check reports not
# tested (BENCHMARKS.md, section 12). configs/ablation/shapes-warm.yaml is this text; the INT8 study and the warm-start
# study train under it (detectors worth quantizing: the start reaches mAP50-95 0.58).
SHAPES_WARM_CONFIG_YAML = """\
# The default ablation before the key data (BENCHMARKS.md, section 12): yolo11n against + CBAM on the plain
# synthetic-shapes, warm start. yolo11n is trained once (5 epochs, the shared start in out/start/); every arm is
# fine-tuned from it for 1 epoch on half the training images, CBAM inserted at γ = 0.3. Its CBAM acts as a fixed
# rescale (its mean gates in place move mAP50-95 by about 0.0005), so the attention check reports it **not tested**:
# kept to show that, and as the design for a plain dataset of your own. About 11 minutes on 2 CPU cores.
#   attn-yolo ablate configs/ablation/shapes-warm.yaml
data: synthetic-shapes  # attn_yolo.synthetic: 4 shape classes on cluttered backgrounds (no key), generated on first use
variants:
  - {name: baseline, model: yolo11n.yaml}
  - {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone, args: [16, 7]}  # CBAM after backbone P3/P4/P5
start:  # the shared start: trained with `train` below, these keys replacing its own (= QUICK_TRAIN_ARGS, 5 epochs)
  epochs: 5
  fraction: 1.0
  lr0: 0.003
  warmup_epochs: 0.3
  val: false
seeds: {min: 3, max: 6}  # paired seeds chosen by the data (alpha-spending stopping rule; a list is a fixed design)
new_blocks: {lr_mult: 1.0, gamma: 0.3}  # the inserted CBAM's residual gates start at 0.3 (BENCHMARKS.md: the study)
devices: [cpu, cpu]  # two worker processes, one run each at a time: Ultralytics trains on one CPU thread, so the two
                     # arms of a seed use both cores. On a GPU: devices=0 (or [0, 1]).
train:  # Ultralytics train arguments of every arm: fine-tuning from the start
  epochs: 1
  fraction: 0.5
  imgsz: 128
  batch: 8
  nbs: 8
  optimizer: AdamW
  lr0: 0.0005  # a fine-tuning rate, and no warmup: warmup_bias_lr (0.1) would first undo the start's head
  warmup_epochs: 0
  mosaic: 0.0
  close_mosaic: 0
  scale: 0.0
  translate: 0.0
  hsv_h: 0.0
  hsv_s: 0.0
  hsv_v: 0.0
  val: true  # validate every epoch, for curves.png
  plots: false
latency: {repeats: 50, warmup: 10}
"""

CONFIG_KEYS = ("data", "variants", "seeds", "train", "out", "latency", "devices", "copy_data", "trust", "backend",
               "ray_address", "resources", "bootstrap", "health", "start", "reference", "placebo", "new_blocks",
               "treatment")
BACKENDS = ("local", "ray")
MODEL_VARIANT_KEYS = ("name", "model", "baseline", "new_blocks")
INSERT_VARIANT_KEYS = ("name", "base", "module", "at", "args", "baseline", "new_blocks")
RESOURCES = Schema([  # Ray resources per run (backend: ray)
    Key("num_cpus", "float", 1, "CPUs per run", low=0, low_open=True),
    Key("num_gpus", "float", 0, "GPUs per run (0: cpu)", low=0),
])
LATENCY = Schema([  # forwards per model; more only costs time
    Key("repeats", "int", 50, "timed forwards per model and round", low=1, high=10000),
    Key("warmup", "int", 10, "untimed forwards first", low=0, high=1000),
])
BOOTSTRAP = Schema([
    Key("resamples", "int", 2000, "image resamples of the per-image bootstrap", low=100, high=100_000),
    Key("seed", "int", 0, "their seed", low=0),
])
SHAPE = Schema([  # the keys checked by their declaration alone; the others by the checks of ablate.config.checks
    Key("latency", "section", help="the latency timing after the runs", schema=LATENCY),
    Key("bootstrap", "section", help="the per-image bootstrap", schema=BOOTSTRAP),
    Key("resources", "section", help="Ray resources per run", schema=RESOURCES),
    Key("backend", "choice", "local", "where runs execute", choices=BACKENDS),
    Key("trust", "bool", False, "load train.pretrained by a full unpickle",
        words="true or false (true: load train.pretrained by a full unpickle)"),
    Key("health", "bool", True, "attention health per run", words="true or false (false: no attention health per run)"),
    Key("copy_data", "any", "auto", "copy the dataset next to the runs", words="auto, true or false",
        check=lambda v: None if v in (True, False, "auto") else "auto, true or false"),
])
"""The ablation config's keys declared once: their types, ranges and defaults (``Schema.check``)."""
RESOURCE_DEFAULTS = RESOURCES.defaults()
LATENCY_DEFAULTS = LATENCY.defaults()
BOOTSTRAP_DEFAULTS = BOOTSTRAP.defaults()  # image resamples of the per-image bootstrap, and their seed
RUNNER_TRAIN_KEYS = {  # Ultralytics train args the runner sets itself → the config key to use instead
    "data": "data",
    "seed": "seeds",
    "model": "variants",
    "project": "out",
    "name": "out",
    "exist_ok": "out",
    "resume": "re-run the same command",
    "mode": None,
    "task": None,
}
SYNTHETIC = "synthetic"  # `data:` keyword for the embedded dataset


class ConfigError(UsageError):
    """The ablation config has problems; ``problems`` lists every one as ``"<config key>: <message>"``."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        if len(self.problems) == 1:  # one line
            super().__init__(f"{source}: {self.problems[0]}")
        else:
            super().__init__(f"{source}: {len(self.problems)} problems in the ablation config:\n{lines}")


@dataclasses.dataclass
class Variant:
    """One model variant: where the trainer builds it from; its size at the config's imgsz once built (``prepare``)."""

    name: str
    model: str  # model YAML path (or Ultralytics name) to train from; insert specs: file name written per run
    model_dict: dict[str, object] | None  # an insert spec's model dict (written to the run folder); None: a model YAML
    definition: str  # canonical JSON of the model definition (for the runs' fingerprints)
    key: str = ""  # the config key its problems are named by: "variants[2] (cbam)", "reference", ...
    spec: dict[str, object] | None = None  # an insert spec's {base (resolved), module, at, args}; None for a model YAML
    params: int | None = None  # parameters of the model built with the dataset's nc (None until built)
    gflops: float | None = None  # Ultralytics get_flops at the config's imgsz (None until built)
    new_blocks: list[str] | None = None  # module paths of the blocks it adds to the baseline ([] for the baseline,
    # None for another model); set by prepare (attn_yolo.ablate.statistics.treatment.new_block_paths)
    block_training: NewBlocks | None = None  # this arm's own `new_blocks:` (None: the config's)


@dataclasses.dataclass
class Ablation:
    """A validated ablation config with resolved paths (``validate``); ``prepare`` makes it ready to run: the dataset
    generated, every arm built and sized, the placebo arms added."""

    source: str  # config file, or the embedded default's ``default_source``
    name: str
    data: str  # dataset YAML (absolute)
    data_id: str  # fingerprint of the dataset YAML
    nc: int
    variants: list[Variant]
    baseline: str
    seeds: list[int]
    train: dict[str, object]  # Ultralytics train arguments of every arm (imgsz among them: ``imgsz`` reads it)
    out: Path
    latency: dict[str, int]  # LATENCY's keys: repeats, warmup
    devices: list[int | str]  # [] → sequential, in this process, on train.device
    copy_data: bool | str
    config: dict[str, object]  # resolved config as written to out/config.yaml
    trust: bool = False  # load train.pretrained by a full unpickle (may run code it contains); else weights-only
    backend: str = "local"  # local (this host: sequential or `devices`) | ray (one Ray task per run)
    ray_address: str | None = None  # None: a local Ray instance started and stopped by the run; `auto`, ray://...
    resources: dict[str, float] = dataclasses.field(default_factory=lambda: dict(RESOURCE_DEFAULTS))  # per Ray task
    bootstrap: dict[str, int] = dataclasses.field(default_factory=lambda: dict(BOOTSTRAP_DEFAULTS))
    health: bool = True  # attention health per run (attn_yolo.health); `health: false` turns it off
    start: Start | None = None  # where every arm starts from; None: every arm from scratch
    seed_rule: SeedRule | None = None  # seeds chosen by the data; None: the fixed list `seeds`
    reference: str | None = None  # the reference arm (the yardstick), one of `variants`
    placebos: dict[str, str] = dataclasses.field(default_factory=dict)  # placebo arm -> the variant it controls
    arm_starts: dict[str, Start] = dataclasses.field(default_factory=dict)  # arm -> a start of its own (a reference)
    new_blocks: NewBlocks | None = None  # how an arm's new blocks train from the start (lr_mult, gamma)
    treatment: Treatment | None = None  # the attention check's threshold
    sdpa: bool = False  # train.sdpa: Ultralytics' Attention/AAttn on fused SDPA (attn_yolo.sdpa); not in ``train``
    prepared: bool = False  # set by prepare: the dataset exists, every arm is built and sized

    @property
    def imgsz(self) -> int:
        """The square training size, pixels: ``train["imgsz"]`` (Ultralytics' default where not given); GFLOPs and
        latency are measured at it."""
        return train_imgsz(self.train)


def train_imgsz(train: dict) -> int:
    """The square size, pixels, that Ultralytics train arguments ``train`` train at (its default 640 where not
    given)."""
    from ultralytics.cfg import DEFAULT_CFG_DICT

    return int(train.get("imgsz", DEFAULT_CFG_DICT["imgsz"]))


# --------------------------------------------------------------------------------------------------- config loading


def load_config(path: str | Path | None, tool: str = "ablate") -> tuple[dict, Path, str, str]:
    """Read an ablation config.

    Args:
        path: config YAML, or None for the embedded default (``DEFAULT_CONFIG_YAML``).

    Returns:
        (raw config dict, folder that relative input paths resolve against, config name, source for messages).

    Raises:
        UsageError: the file is missing or is not a YAML mapping.
    """
    if path is None:
        text, base, name = DEFAULT_CONFIG_YAML, Path.cwd(), DEFAULT_CONFIG_NAME
        source = default_source("ablate", f"configs/ablation/{DEFAULT_CONFIG_NAME}.yaml")
    else:
        p = Path(path).expanduser()
        if not p.is_file():
            raise UsageError(f"attn-yolo {tool}: config file not found: {path}")
        text, base, name, source = p.read_text(), p.resolve().parent, p.stem, str(path)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(f"{source}: not valid YAML at {yaml_syntax_problem(e)}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{source}: expected a mapping with keys {', '.join(CONFIG_KEYS)}, got {type(raw).__name__}")
    return raw, base, name, source


def default_source(tool: str, text_at: str = "") -> str:
    """What a problem of a tool's embedded default config is named by (``ConfigError``'s source): the tool's default
    config, not the name of what it runs (``data=`` and overrides change that), with the file holding the same text
    (``configs/ablation/synthetic-quick.yaml``) where there is one."""
    return f"the default config of attn-yolo {tool}" + (f" ({text_at})" if text_at else "")


def override_value(text: str):
    """A command-line value: YAML when it opens a mapping or a list (``{min: 3, max: 12}`` or ``{max:12}``,
    ``[0, 1, 2]``), else
    Ultralytics' own reading (``smart_value``: numbers, bools, None); a tuple (``0,1``) as a list."""
    from ultralytics.cfg import smart_value

    if text.strip().startswith(("{", "[")):
        if text.strip().startswith("{"):  # {max:4} as a shell user types it: YAML wants {max: 4}
            text = re.sub(r"(\w):(?=[^\s/])", r"\1: ", text)
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            pass  # read as Ultralytics reads it; validation names the key
    v = smart_value(text)
    return list(v) if isinstance(v, tuple) else v


def set_dotted(raw: dict, path: list[str], value, where: str) -> None:
    """``raw[path[0]][path[1]]... = value``, making the mappings on the way (``search.seeds.max=12``).

    Raises:
        UsageError: a key on the way holds a value that is not a mapping (``where`` names the token).
    """
    node = raw
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is not None and not isinstance(child, dict):
            name = ".".join(path[: i + 1])
            raise UsageError(f"{where}: {name} is {child!r} in the config, not a mapping; give it whole ({name}=...)")
        node[part] = dict(child or {})
        node = node[part]
    node[path[-1]] = value


def apply_overrides(raw: dict, overrides: list[str], tool: str = "ablate") -> dict:
    """Apply command-line ``key=value`` overrides: top-level config keys, one key of a mapping (``seeds.max=12``,
    ``start.epochs=3``, ``new_blocks.gamma=0.1``, a search's ``search.max_runs=9``), or Ultralytics train args (into
    ``train``). A value in braces or brackets is YAML (``seeds={min: 3, max: 12}``). ``device=`` replaces the
    config's ``devices`` and ``devices=`` its ``train.device``: the command line says where the runs go.

    Raises:
        UsageError: a token without ``=``, ``variants=...``, a dotted key into a value that is not a mapping, or a
            key that is neither (naming the closest key); each line names ``attn-yolo <tool>``.
    """
    from ultralytics.cfg import DEFAULT_CFG_DICT

    raw = copy.deepcopy(raw)
    for tok in overrides:
        key, eq, value = tok.partition("=")
        if not eq or not key:
            raise UsageError(f"attn-yolo {tool}: expected key=value after the config, got {tok!r}")
        if key == "variants":
            raise UsageError(f"attn-yolo {tool}: variants cannot be overridden on the command line; edit the config")
        v = override_value(value)
        head, dot, sub = key.partition(".")
        if dot and sub and (head in CONFIG_KEYS or isinstance(raw.get(head), dict)):  # seeds.max=12, search.seeds.max=9
            set_dotted(raw, key.split("."), v, f"attn-yolo {tool}: {tok}")
            continue
        if key == "devices" and isinstance(v, str):  # devices=0,1 or devices=[cpu,cpu]
            v = [override_value(x.strip()) for x in v.strip("[]").split(",") if x.strip()]
        if key in CONFIG_KEYS or key in raw:  # a key of the config, or of this config's own sections (search=)
            raw[key] = v
            if key == "devices" and isinstance(raw.get("train"), dict):  # the newer word on where runs go wins
                raw["train"] = {k: x for k, x in raw["train"].items() if k != "device"}
        elif key in DEFAULT_CFG_DICT:
            train = raw.get("train")
            raw["train"] = {**(train if isinstance(train, dict) else {}), key: v}
            if key == "device":  # device=0 on the command line replaces the config's `devices` (one device, in-process)
                raw.pop("devices", None)
        else:
            hint = did_you_mean(key, [*CONFIG_KEYS, *(k for k in DEFAULT_CFG_DICT if k not in RUNNER_TRAIN_KEYS)])
            raise UsageError(
                f"attn-yolo {tool}: {key}: unknown key{hint}; allowed: {', '.join(CONFIG_KEYS)}"
                f"{', search.<key>' if tool == 'search' else ''}, or any Ultralytics "
                "train argument (goes into `train`)"
            )
    return raw


def from_command_line(problems: list[str], overrides: list[str], sections: tuple[str, ...] = ()) -> list[str]:
    """``problems`` (``"<key>: ..."``), each of a key given on the command line marked as such:
    ``seeds: 'abc'; expected ... (from the command line: seeds=abc)``; a train argument is ``train.<key>``;
    ``sections``: a tool's own top-level keys besides the ablation's (the search's ``search``)."""
    out = []
    for p in problems:
        head = p.split(":", 1)[0]
        for tok in overrides:
            k = tok.partition("=")[0]
            own = re.split(r"[.\[]", k)[0] in (*CONFIG_KEYS, *sections)
            key = k if own else f"train.{k}"  # seeds.min, train.epochs, search.precision: as given
            if head == key or head.startswith((f"{key}.", f"{key}[")):
                p = f"{p} (from the command line: {tok})"
                break
        out.append(p)
    return out


def first_line(e: BaseException, limit: int = 400) -> str:
    """An error as one line for a config problem or a failed run's record: ``"<type>: <message>"``, ``limit`` chars."""
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg}"[:limit]
