"""``attn-yolo`` command line: Ultralytics' own CLI with the attention blocks registered, plus the plugin's tools.

    attn-yolo train model=models/yolo11n-cbam.yaml data=coco128.yaml epochs=10   # any Ultralytics mode and args
    attn-yolo modules                                                             # the blocks and their defaults
    attn-yolo insert | ablate | export | heatmap | bench  key=value ...           # the plugin's tools
    attn-yolo train model=yolo12n.yaml data=coco128.yaml sdpa=True                # Ultralytics' attention on SDPA

Tools take Ultralytics-style ``key=value`` arguments; ``attn-yolo <tool> help`` prints a tool's keys.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys

from attn_yolo.args import UsageError

TOOLS = {  # sub-command → "module:function" taking argv (list[str]) and returning an exit code
    "modules": "attn_yolo.cli:modules_main",
    "insert": "attn_yolo.insertion:main",
    "ablate": "attn_yolo.ablate:main",
    "export": "attn_yolo.export:main",
    "heatmap": "attn_yolo.heatmap:main",
    "bench": "attn_yolo.bench:main",
}


def modules_main(argv: list[str]) -> int:
    """Print every attention block with its YAML name, hyperparameters and defaults, and its paper."""
    from attn_yolo import ALIASES, MODULES
    from attn_yolo.conventions import NONE_MEANS, yaml_params

    width = max(map(len, MODULES)) + 2  # one column for the longest name (ShuffleAttention, TripletAttention)
    for name, cls in MODULES.items():
        params = [inspect.signature(cls).parameters[p] for p in yaml_params(cls)]
        args = ", ".join(f"{p.name}={NONE_MEANS.get((name, p.name), p.default)!s}" for p in params)
        title = (cls.__doc__ or "").strip().splitlines()[0]
        aliases = [a for a, n in ALIASES.items() if n == name]
        print(f"{name:<{width}}[{args}]\n{'':<{width}}{title}")
        print(f"{'':<{width}}also named: {', '.join(aliases) if aliases else '-'}")
    print("\nYAML: [-1, 1, NAME, [args in the order above]]; input channels are inferred from the layer the row reads"
          " (a leading channel count, as other attention code writes it, is read as such).")
    return 0


ULTRALYTICS_COMMANDS = ("checks", "version", "settings", "cfg", "login", "logout", "copy-cfg", "solutions", "help")
"""The special first words of Ultralytics' own CLI (``yolo checks``, ``yolo settings``, ...)."""


def check_command(word: str) -> None:
    """Raise ``UsageError`` for a first word that neither a tool nor Ultralytics' CLI knows (``ablat``, ``foo``),
    suggesting the closest tool or mode, instead of Ultralytics' ``SyntaxError`` traceback. Ultralytics' modes, tasks,
    ``key=value`` arguments, flags and special commands go to Ultralytics' own command line as they are.

    Raises:
        UsageError: ``unknown command 'ablat'. Did you mean 'attn-yolo ablate'? ...``.
    """
    from ultralytics.cfg import DEFAULT_CFG_DICT, MODES, TASKS

    special = {v for k in ULTRALYTICS_COMMANDS for v in (k, k[0], k[:-1] if k.endswith("s") else k)}
    if "=" in word or word.startswith("-") or word in (*MODES, *TASKS, *special) or word in DEFAULT_CFG_DICT:
        return
    close = difflib.get_close_matches(word, [*TOOLS, *MODES], n=1, cutoff=0.6)
    hint = f" Did you mean 'attn-yolo {close[0]}'?" if close else ""
    raise UsageError(
        f"attn-yolo: unknown command {word!r}.{hint} Tools: {', '.join(TOOLS)}; Ultralytics modes: "
        f"{', '.join(MODES)}; or Ultralytics arguments such as model=... data=..."
    )


def pop_sdpa(argv: list[str]) -> tuple[list[str], bool]:
    """Take ``sdpa=True|False`` out of Ultralytics' arguments (Ultralytics would refuse the key); default False.

    Raises:
        UsageError: a value other than True or False.
    """
    from ultralytics.cfg import smart_value

    rest, on = [], False
    for tok in argv:
        key, eq, value = tok.partition("=")
        if not (eq and key == "sdpa"):
            rest.append(tok)
            continue
        on = smart_value(value)
        if not isinstance(on, bool):
            raise UsageError(f"attn-yolo: sdpa={value!r} is invalid; allowed: True or False (True: Ultralytics' own "
                             "Attention and AAttn layers run on fused scaled_dot_product_attention; default False)")
    return rest, on


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``attn-yolo`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    import attn_yolo  # noqa: F401  registers the blocks before Ultralytics parses any YAML

    try:
        if argv and argv[0] in TOOLS:
            module, _, func = TOOLS[argv[0]].partition(":")
            return int(getattr(importlib.import_module(module), func)(argv[1:]) or 0)
        if argv:
            check_command(argv[0])
        argv, sdpa = pop_sdpa(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not argv or argv[0] in ("help", "-h", "--help"):
        print(__doc__.strip() + f"\n\nTools: {', '.join(TOOLS)}. Ultralytics' own help follows.\n")
    import ultralytics.cfg

    from attn_yolo import sdpa as fused

    before, argv0 = fused.is_default(), ultralytics.cfg.ARGV
    if sdpa:  # this process, and DDP workers through the trainer's callbacks (attn_yolo.sdpa)
        fused.set_default(True)
        fused.register_default_callbacks(True)
    # Ultralytics' entrypoint parses ultralytics.cfg.ARGV, the sys.argv list it saw at import: give it ours (sdpa= out)
    sys.argv = ultralytics.cfg.ARGV = ["attn-yolo", *argv]
    try:
        ultralytics.cfg.entrypoint()
    finally:  # for callers that run several commands in one process (tests)
        ultralytics.cfg.ARGV = argv0
        if sdpa:
            fused.register_default_callbacks(False)
            fused.set_default(before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
