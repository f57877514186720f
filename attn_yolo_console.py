"""The ``attn-yolo`` console script: help and mistyped commands answered before torch loads, the rest run by the CLI.

``import attn_yolo`` registers the blocks with Ultralytics, which imports torch (3-60 s, more on a cold disk). This
module sits outside the package so that ``attn-yolo``, ``attn-yolo help`` and a typo (``attn-yolo ablat``) answer at
once; every other command line goes to ``attn_yolo.cli.run`` with the blocks registered.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.metadata
import importlib.util
import sys

HELP = """\
attn-yolo: Ultralytics' own CLI with the attention blocks registered, plus the plugin's tools.

    attn-yolo train model=models/yolo11n-cbam.yaml data=coco128.yaml epochs=10   # any Ultralytics mode and args
    attn-yolo train ... health=False                                              # no attention health per epoch
    attn-yolo val model=path/to/best.pt data=...      # checkpoints load weights-only; trust=True: a full unpickle
    attn-yolo modules                                                             # the blocks and their defaults
    attn-yolo insert | ablate | search | export | heatmap | bench  key=value ...  # the plugin's tools
    attn-yolo explain out=runs/ablate/synthetic-key-cbam                          # why an ablation's Δ
    attn-yolo train model=yolo12n.yaml data=coco128.yaml sdpa=True                # Ultralytics' attention on SDPA
    attn-yolo --version                                                           # attn-yolo, Ultralytics, torch

Tools take Ultralytics-style ``key=value`` arguments; ``attn-yolo <tool> help`` prints a tool's keys."""
HELP_WORDS = ("help", "-h", "--help")
VERSION_WORDS = ("--version", "version")  # Ultralytics' ``yolo version`` prints its own version only
VERSIONED = ("attn-yolo", "ultralytics", "torch")  # the distributions ``attn-yolo --version`` names


@dataclasses.dataclass(frozen=True)
class Tool:
    """One of the plugin's sub-commands: ``entry`` (``"module:function"``, taking argv and returning an exit code) and
    ``schema_at`` (``"module:NAME"`` of its ``attn_yolo.args.Schema``; None: its keys are its config's)."""

    entry: str
    schema_at: str | None

    @property
    def schema(self):
        """The tool's keys (``attn_yolo.args.Schema``; ``rows()``: name, type, default, allowed, help), imported on
        use; None for a tool whose keys are its config's."""
        if self.schema_at is None:
            return None
        module, _, name = self.schema_at.partition(":")
        return getattr(importlib.import_module(module), name)

    def run(self, argv: list[str]) -> int:
        """Run the tool on its own arguments (without the tool's name): its exit code."""
        module, _, func = self.entry.partition(":")
        return int(getattr(importlib.import_module(module), func)(argv) or 0)


TOOLS = {  # sub-command → its entry point and key schema
    "modules": Tool("attn_yolo.cli:modules_main", "attn_yolo.cli:MODULES_SCHEMA"),
    "insert": Tool("attn_yolo.insertion:main", "attn_yolo.insertion:SCHEMA"),
    "ablate": Tool("attn_yolo.ablate:main", None),  # a config file and its dotted overrides (ablate.config.ablation)
    "export": Tool("attn_yolo.export:main", "attn_yolo.export:SCHEMA"),
    "heatmap": Tool("attn_yolo.heatmap:main", "attn_yolo.heatmap:SCHEMA"),
    "bench": Tool("attn_yolo.bench:main", "attn_yolo.bench:SCHEMA"),
    "explain": Tool("attn_yolo.explain:main", "attn_yolo.explain:SCHEMA"),
    "search": Tool("attn_yolo.search:main", None),  # an ablation config with a search: section (attn_yolo.search)
}


def ultralytics_words():
    """Ultralytics' CLI first words (``words.FirstWords``: its modes, and every word), read from its files by
    ``attn_yolo/ultralytics_api/words.py`` (the seam's reader), loaded by its path so that neither ``attn_yolo``
    nor Ultralytics (nor torch) is imported; None when they cannot be read."""
    spec = importlib.util.find_spec("attn_yolo")  # a top-level name: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    path = f"{list(spec.submodule_search_locations)[0]}/ultralytics_api/words.py"
    words_spec = importlib.util.spec_from_file_location("attn_yolo_console_words", path)
    module = importlib.util.module_from_spec(words_spec)
    try:
        words_spec.loader.exec_module(module)
    except OSError:
        return None
    return module.first_words()


def unknown_command(word: str) -> str | None:
    """The error for a first word that neither a tool nor Ultralytics' CLI knows (``ablat``, ``foo``), with the
    closest tool or mode; None for a word to run (a tool, an Ultralytics mode, task, special command or config key,
    ``key=value``, a flag), or when Ultralytics' words cannot be read (Ultralytics' CLI then answers)."""
    if word in TOOLS or "=" in word or word.startswith("-"):
        return None
    known = ultralytics_words()
    if known is None or word in known.words:
        return None
    # attn_yolo.text's did_you_mean, written out: importing the package would import torch before this answers
    close = difflib.get_close_matches(word, [*TOOLS, *known.modes], n=1, cutoff=0.6)
    hint = f" Did you mean 'attn-yolo {close[0]}'?" if close else ""
    return (f"attn-yolo: unknown command {word!r}.{hint} Tools: {', '.join(TOOLS)}; Ultralytics modes: "
            f"{', '.join(known.modes)}; or Ultralytics arguments such as model=... data=...")


def versions() -> str:
    """One line naming the installed versions of attn-yolo, Ultralytics and torch (``attn-yolo 0.1.0, ultralytics
    8.4.190, torch 2.14.1``), read from the distributions' metadata: nothing is imported (no torch)."""

    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return ", ".join(f"{name} {version(name)}" for name in VERSIONED)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``attn-yolo`` console script: its exit code (2: a usage error, said in one line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    word = argv[0] if argv else None
    if word in VERSION_WORDS:
        print(versions())
        return 0
    if word is None or word in HELP_WORDS:
        print(f"{HELP}\n\nTools: {', '.join(TOOLS)}. Ultralytics' own help follows.\n", flush=True)
    elif problem := unknown_command(word):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from attn_yolo import cli  # registers the blocks before Ultralytics parses any YAML (imports torch)

    return cli.run(argv, TOOLS.get(word))


if __name__ == "__main__":
    sys.exit(main())
