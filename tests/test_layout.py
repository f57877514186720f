"""The package's architecture holds: imports point down the layers, no cycles, no tool imports the CLI, one job per
module (stated in its docstring's first line), functions of at most ``MAX_FUNCTION_LINES`` lines, and the module paths
that checkpoints pickle are the pinned ones."""

from __future__ import annotations

import ast
import os
import pickletools
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "attn_yolo"
MAX_FUNCTION_LINES = 60  # a function reads top to bottom on one screen
MAX_JOB_LINE = 120  # the first docstring line states the module's one job in one sentence

LONG_FUNCTIONS: dict[str, str] = {}  # function → why its code is still longer than MAX_FUNCTION_LINES (none)

# Layer of each top-level part of the package; a module may import only its own layer or lower ones.
LAYERS = {
    "nn": 0,
    "ultralytics_api": 0.5,  # the seam to Ultralytics' internals: imports nothing else of attn_yolo
    "conventions": 1, "row_readings": 1, "signatures": 1, "csp": 1,
    "registry": 2,
    "markdown": 1,  # the reports' Markdown model: imports nothing else of attn_yolo
    "text": 1,  # how messages and reports write a hint, a number, an interval: imports nothing else of attn_yolo
    "args": 3, "checkpoint": 3, "files": 3, "copies": 3, "images": 3, "synthetic": 3, "sdpa": 3, "progress": 3,
    "insertion": 4, "heatmap": 4, "health": 4, "capture": 4,
    "ablate": 5, "bench": 5, "export": 5,  # export's INT8 check reuses the ablation's per-image bootstrap
    "explain": 5.5, "search": 5.5,
    "cli": 6, "__init__": 6,
}  # fmt: skip

# Class paths that checkpoints pickle: part of the checkpoint format, changed only deliberately (a set of
# paths, not a table keyed by block: the blocks' declarations must build exactly these).
PINNED_CLASSES = {
    "attn_yolo.nn.se.SE",
    "attn_yolo.nn.eca.ECA",
    "attn_yolo.nn.cbam.SAM",
    "attn_yolo.nn.cbam.CBAM",
    "attn_yolo.nn.mhsa.MHSA",
    "attn_yolo.nn.coordatt.CoordAtt",
    "attn_yolo.nn.ema.EMA",
    "attn_yolo.nn.simam.SimAM",
    "attn_yolo.nn.gam.GAM",
    "attn_yolo.nn.shuffle.ShuffleAttention",
    "attn_yolo.nn.triplet.TripletAttention",
    "attn_yolo.nn.nam.NAM",
    "attn_yolo.nn.lska.LSKA",
    "attn_yolo.nn.mlca.MLCA",
    "attn_yolo.nn.ela.ELA",
    "attn_yolo.nn.caa.CAA",
    "attn_yolo.nn.sk.SKAttention",
    "attn_yolo.nn.biformer.BiLevelRoutingAttention",
}
PINNED_HELPERS = {"attn_yolo.nn.cbam.ChannelGate", "attn_yolo.nn.cbam.SpatialGate",
                  "attn_yolo.nn.layer_scale.LayerScale",
                  "attn_yolo.nn.triplet.ZPoolGate", "attn_yolo.nn.sk.SKBranches"}


def modules() -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of the package."""
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def type_only(tree: ast.AST) -> set[int]:
    """``id`` of every node under ``if TYPE_CHECKING:``: imports for annotations, never run."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            out |= {id(n) for b in node.body for n in ast.walk(b)}
    return out


def imports(name: str, file: Path, known: set[str], runtime: bool = False) -> set[str]:
    """Package modules that ``name`` imports anywhere in its file (module level and inside functions); ``runtime``:
    only those that run (not the annotations' imports under ``if TYPE_CHECKING:``)."""
    is_pkg = file.name == "__init__.py"
    found = set()
    tree = ast.parse(file.read_text())
    skip = type_only(tree) if runtime else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "attn_yolo"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "attn_yolo":
                continue
            for a in node.names:  # `from attn_yolo import build` imports the submodule attn_yolo.build
                found.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    return {m for m in found if m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, f, set(mods)) for name, f in mods.items()}


@pytest.fixture(scope="module")
def runtime_graph() -> dict[str, set[str]]:
    """The imports that run: an import for annotations only (``if TYPE_CHECKING:``) points down like any other
    (``graph``), but cannot make a cycle."""
    mods = modules()
    return {name: imports(name, f, set(mods), runtime=True) for name, f in mods.items()}


def layer(name: str) -> int:
    parts = name.split(".")
    return LAYERS["__init__" if len(parts) == 1 else parts[1]]


def job_line(f: Path) -> str:
    """The first line of a module's docstring: the one job it states ('' if none)."""
    doc = ast.get_docstring(ast.parse(f.read_text())) or ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def job_problem(line: str) -> str | None:
    """Why a module docstring's first line does not state one job in one sentence, or None."""
    if not line:
        return "no docstring stating its job"
    if len(line) > MAX_JOB_LINE:
        return f"first docstring line of {len(line)} characters (at most {MAX_JOB_LINE}: one sentence)"
    if not line.endswith((".", ":")):
        return f"first docstring line {line!r} does not end its sentence ('.' or ':'): it wraps onto the next line"
    return None


def test_every_module_has_a_layer_and_states_its_one_job():
    """Each module has its place in ``LAYERS`` and its docstring's first line states its job in one sentence; no two
    modules state the same job."""
    bad, seen = [], {}
    for name, f in modules().items():
        layer(name)  # KeyError: a new top-level module needs its place in LAYERS
        line = job_line(f)
        if why := job_problem(line):
            bad.append(f"{name}: {why}")
        elif line in seen:
            bad.append(f"{name} states the job of {seen[line]}: {line!r} (one job, one module)")
        seen.setdefault(line, name)
    assert not bad, "\n".join(bad)
    assert len(seen) > 50  # the scan sees the whole package


@pytest.mark.parametrize(("line", "expected"), [
    ("", "no docstring"),
    ("The export matrix: every block, each cell exported, verified against PyTorch and recorded PASS / FAIL / not"
     " supported with the reason of each, per runtime.", "at most"),
    ("Reading the images a tool runs on: files, folders, globs; by default the model's own", "wraps"),
])  # fmt: skip
def test_job_rule_flags_a_planted_docstring(line, expected):
    assert expected in (job_problem(line) or "")
    assert job_problem("The ablation's plots: ablation.png, curves.png and delta.png.") is None


def long_functions(source: str, module: str) -> dict[str, int]:
    """``{module.function: lines}`` for every function (methods and nested ones too) longer than
    ``MAX_FUNCTION_LINES`` lines: from its ``def`` to its last line, decorators and its docstring left out."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                   str):
                n -= first.end_lineno - first.lineno + 1
            if n > MAX_FUNCTION_LINES:
                out[f"{module}.{node.name}"] = n
    return out


def test_functions_read_on_one_screen():
    """No function is longer than ``MAX_FUNCTION_LINES`` lines but those ``LONG_FUNCTIONS`` names with the reason;
    one that got short enough leaves the list."""
    found = {}
    for name, f in modules().items():
        found |= long_functions(f.read_text(), name if f.name != "__init__.py" else f"{name}.__init__")
    new = sorted(f"{k}: {n} lines" for k, n in found.items() if k not in LONG_FUNCTIONS)
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n" + "\n".join(new)
    short = sorted(set(LONG_FUNCTIONS) - set(found))
    assert not short, f"now at most {MAX_FUNCTION_LINES} lines: take them out of LONG_FUNCTIONS: {short}"


def test_function_length_scan_flags_a_planted_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n", "m") == {"m.f": MAX_FUNCTION_LINES + 1}
    assert long_functions("class C:\n    def g(self):\n        return 1\n", "m") == {}
    doc = '    """' + "\n".join(["x"] * MAX_FUNCTION_LINES) + '"""\n'
    assert long_functions(f"def f():\n{doc}    return 1\n", "m") == {}  # a long docstring is not code


def test_imports_point_down_and_never_at_the_cli(graph):
    bad = []
    for name, deps in graph.items():
        for d in deps:
            if d == "attn_yolo.cli" and name != "attn_yolo.cli":
                bad.append(f"{name} imports the CLI")
            elif d == "attn_yolo" and layer(name) < LAYERS["__init__"]:
                bad.append(f"{name} imports the package root 'attn_yolo' (import the module it needs)")
            elif layer(d) > layer(name):
                bad.append(f"{name} (layer {layer(name)}) imports {d} (layer {layer(d)})")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycle(runtime_graph):
    graph = runtime_graph
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles = []

    def visit(n, stack):
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d in graph and not state.get(d):
                visit(d, stack + [d])
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n, [n])
    assert not cycles, "\n".join(cycles)


def test_cycle_detector_catches_a_cycle(tmp_path):
    """The walker sees function-level and relative imports (so the tests above can fail)."""
    (tmp_path / "a.py").write_text("def f():\n    from attn_yolo.b import g\n")
    known = {"attn_yolo.a", "attn_yolo.b"}
    assert imports("attn_yolo.a", tmp_path / "a.py", known) == {"attn_yolo.b"}
    (tmp_path / "__init__.py").write_text("from . import a\nfrom .b import g\n")
    assert imports("attn_yolo", tmp_path / "__init__.py", known) == {"attn_yolo.a", "attn_yolo.b"}
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                   "    from attn_yolo.b import g\n")
    assert imports("attn_yolo.c", tmp_path / "c.py", known) == {"attn_yolo.b"}  # its layer is checked
    assert imports("attn_yolo.c", tmp_path / "c.py", known, runtime=True) == set()  # it never runs: no cycle


def pickled_globals(path: Path) -> set[str]:
    """``module.qualname`` of every global a torch checkpoint's pickle references, read without unpickling."""
    with zipfile.ZipFile(path) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    out, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL":
            out.add(f"{strings[-2]}.{strings[-1]}")
        elif op.name == "GLOBAL":
            out.add(arg.replace(" ", "."))
    return out


def test_checkpoint_class_paths_are_pinned_and_reload_without_import(tmp_path):
    from ultralytics.nn.tasks import DetectionModel

    import attn_yolo
    from attn_yolo.checkpoint import save_checkpoint

    assert {f"{c.__module__}.{c.__qualname__}" for c in attn_yolo.MODULES.values()} == PINNED_CLASSES
    rows = [[-1, 1, "Conv", [32, 3, 2]]] + [[-1, 1, name, []] for name in attn_yolo.MODULES] + [[-1, 1, "SE", [4, 0.0]]]
    d = {"nc": 2, "backbone": rows, "head": [[[-1], 1, "Detect", ["nc"]]]}
    ckpt = save_checkpoint(DetectionModel(d, verbose=False), tmp_path / "all.pt")
    ours = {g for g in pickled_globals(ckpt) if g.startswith("attn_yolo")}
    assert ours == PINNED_CLASSES | PINNED_HELPERS

    code = (
        "import sys\nfrom ultralytics import YOLO\n"
        f"m = YOLO({str(ckpt)!r}).model\n"
        "print(sorted({type(x).__module__ + '.' + type(x).__qualname__ for x in m.modules()"
        " if type(x).__module__.startswith('attn_yolo')}))\n"
        "print('attn_yolo.registry' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "YOLO_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert set(ast.literal_eval(lines[-2])) == PINNED_CLASSES | PINNED_HELPERS
