"""The package's architecture holds: imports point down the layers, no cycles, no tool imports the CLI, and the
module paths that checkpoints pickle are the pinned ones."""

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
MAX_LINES = 450  # one job per module: a module past this size does several

# Layer of each top-level part of the package; a module may import only its own layer or lower ones.
LAYERS = {
    "nn": 0,
    "ultralytics_api": 0.5,  # the seam to Ultralytics' internals: imports nothing else of attn_yolo
    "conventions": 1, "row_readings": 1, "signatures": 1, "csp": 1,
    "registry": 2,
    "args": 3, "checkpoint": 3, "copies": 3, "images": 3, "synthetic": 3, "sdpa": 3,
    "insertion": 4, "heatmap": 4, "health": 4,
    "ablate": 5, "bench": 5, "export": 5,  # export's INT8 check reuses the ablation's per-image bootstrap
    "explain": 5.5,
    "cli": 6, "__init__": 6,
}  # fmt: skip

# Class paths that checkpoints pickle: part of the checkpoint format, changed only deliberately.
PINNED_CLASSES = {
    "SE": "attn_yolo.nn.se.SE",
    "ECA": "attn_yolo.nn.eca.ECA",
    "SAM": "attn_yolo.nn.cbam.SAM",
    "CBAM": "attn_yolo.nn.cbam.CBAM",
    "MHSA": "attn_yolo.nn.mhsa.MHSA",
    "CoordAtt": "attn_yolo.nn.coordatt.CoordAtt",
    "EMA": "attn_yolo.nn.ema.EMA",
    "SimAM": "attn_yolo.nn.simam.SimAM",
    "GAM": "attn_yolo.nn.gam.GAM",
    "ShuffleAttention": "attn_yolo.nn.shuffle.ShuffleAttention",
    "TripletAttention": "attn_yolo.nn.triplet.TripletAttention",
    "NAM": "attn_yolo.nn.nam.NAM",
    "LSKA": "attn_yolo.nn.lska.LSKA",
    "MLCA": "attn_yolo.nn.mlca.MLCA",
    "ELA": "attn_yolo.nn.ela.ELA",
    "CAA": "attn_yolo.nn.caa.CAA",
    "SKAttention": "attn_yolo.nn.sk.SKAttention",
    "BiLevelRoutingAttention": "attn_yolo.nn.biformer.BiLevelRoutingAttention",
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


def imports(name: str, file: Path, known: set[str]) -> set[str]:
    """Package modules that ``name`` imports anywhere in its file (module level and inside functions)."""
    is_pkg = file.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(file.read_text())):
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


def layer(name: str) -> int:
    parts = name.split(".")
    return LAYERS["__init__" if len(parts) == 1 else parts[1]]


def test_every_module_has_a_layer_and_a_one_line_docstring():
    for name, f in modules().items():
        layer(name)  # KeyError: a new top-level module needs its place in LAYERS
        doc = ast.get_docstring(ast.parse(f.read_text()))
        assert doc and doc.strip().splitlines()[0].strip(), f"{name} has no docstring stating its job"


def test_no_module_over_max_lines():
    """Every module of the package, sub-packages included, stays within ``MAX_LINES`` lines."""
    sizes = {name: len(f.read_text().splitlines()) for name, f in modules().items()}
    over = sorted(f"{name}: {n} lines" for name, n in sizes.items() if n > MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines (split them by job):\n" + "\n".join(over)
    assert len(sizes) > 50 and max(sizes.values()) > 100  # the scan sees the whole package


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


def test_no_import_cycle(graph):
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

    assert {k: f"{c.__module__}.{c.__qualname__}" for k, c in attn_yolo.MODULES.items()} == PINNED_CLASSES
    rows = [[-1, 1, "Conv", [32, 3, 2]]] + [[-1, 1, name, []] for name in PINNED_CLASSES] + [[-1, 1, "SE", [4, 0.0]]]
    d = {"nc": 2, "backbone": rows, "head": [[[-1], 1, "Detect", ["nc"]]]}
    ckpt = save_checkpoint(DetectionModel(d, verbose=False), tmp_path / "all.pt")
    ours = {g for g in pickled_globals(ckpt) if g.startswith("attn_yolo")}
    assert ours == set(PINNED_CLASSES.values()) | PINNED_HELPERS

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
    assert set(ast.literal_eval(lines[-2])) == set(PINNED_CLASSES.values()) | PINNED_HELPERS
