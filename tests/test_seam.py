"""Only ``attn_yolo.ultralytics_api`` (the seam package) touches Ultralytics internals:
an AST scan of every other module of the package
(frame locals, ``vars()`` of an Ultralytics module, private names of Ultralytics objects, assignments to Ultralytics
modules' or classes' attributes, the attributes the seam wraps), and proof that the scan flags each pattern."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "attn_yolo"
SEAM = PKG / "ultralytics_api"

FRAME_NAMES = {"_getframe", "f_locals", "f_globals", "f_back", "currentframe", "tb_frame"}
"""Frame access: only the seam reads Ultralytics' frames."""
WRAPPED_ATTRS = {"pt_path", "tloss", "ckpt", "default_callbacks", "ARGV", "callbacks", "test_loader", "scale_preds",
                 "np"}
"""Ultralytics attributes attn_yolo relies on that the seam wraps (``model_file``, ``epoch_losses``, ``add_callbacks``,
``validation_images``, ``relabel_layer``, ...)."""
SWAPPED_ATTRS = {"__class__": "assigns __class__ (use ultralytics_api.layers.become)",
                 "forward": "assigns an instance's forward (use ultralytics_api.layers.instance_forward)"}
"""Attributes whose assignment changes what a module computes behind Ultralytics' back: only the seam does it."""


def _root(node) -> ast.AST:
    """The innermost object of ``a.b[c].d``: the ``Name`` ``a`` (or whatever starts the chain)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def violations(source: str, filename: str = "<string>") -> list[str]:
    """Each Ultralytics-internal access in ``source``, as ``file:line: what``."""
    tree = ast.parse(source)
    ulx: set[str] = set()  # names bound to something imported from ultralytics
    out: list[str] = []

    def flag(node, what: str) -> None:
        out.append(f"{filename}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "ultralytics":
                    ulx.add(a.asname or "ultralytics")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ultralytics" and not node.level:
            for a in node.names:
                ulx.add(a.asname or a.name)
                if _private(a.name):
                    flag(node, f"imports the private {node.module}.{a.name}")
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "_getframe" for a in node.names):
            flag(node, "imports sys._getframe")

    def from_ulx(node) -> bool:
        r = _root(node)
        return isinstance(r, ast.Name) and r.id in ulx

    ulx_self = set()  # `self` nodes inside the methods of classes with an Ultralytics base
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(from_ulx(b) for b in node.bases):
            ulx_self |= {id(n) for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == "self"}

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in FRAME_NAMES:
                flag(node, f"frame access .{node.attr}")
            elif _private(node.attr) and from_ulx(node.value):
                flag(node, f"private Ultralytics name .{node.attr}")
            elif _private(node.attr) and id(node.value) in ulx_self:
                flag(node, f"private attribute self.{node.attr} of an Ultralytics subclass")
            elif node.attr in WRAPPED_ATTRS:
                flag(node, f".{node.attr} (use the attn_yolo.ultralytics_api function for it)")
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and _private(kw.arg):
                    flag(node, f"private keyword argument {kw.arg}=")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if node.func.id == "vars" and args and from_ulx(args[0]):
                flag(node, "vars() of an Ultralytics module or class")
            elif node.func.id in ("setattr", "delattr") and args and from_ulx(args[0]):
                flag(node, f"{node.func.id}() on an Ultralytics module or class")
            elif (node.func.id == "setattr" and len(args) > 1 and isinstance(args[1], ast.Constant)
                  and args[1].value in SWAPPED_ATTRS):
                flag(node, SWAPPED_ATTRS[args[1].value])
            elif node.func.id in ("getattr", "hasattr") and len(args) > 1 and isinstance(args[1], ast.Constant) and (
                    args[1].value in WRAPPED_ATTRS or (isinstance(args[1].value, str) and _private(args[1].value)
                                                        and from_ulx(args[0]))):
                flag(node, f"{node.func.id}(..., {args[1].value!r})")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for leaf in ast.walk(t):
                    if isinstance(leaf, ast.Attribute) and from_ulx(leaf.value):
                        flag(node, f"assigns {ast.unparse(leaf)} of an Ultralytics module or class")
                    elif (isinstance(leaf, ast.Attribute) and leaf.attr in SWAPPED_ATTRS
                          and isinstance(node, ast.Assign)):
                        flag(node, SWAPPED_ATTRS[leaf.attr])
                    elif (isinstance(leaf, ast.Attribute) and leaf.attr == "shape" and isinstance(node, ast.Assign)
                          and isinstance(node.value, ast.Constant) and node.value.value is None):
                        flag(node, f"assigns {ast.unparse(leaf)} = None (Detect's anchor cache)")
        elif isinstance(node, ast.ClassDef) and any(from_ulx(b) for b in node.bases):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name):
                    flag(item, f"overrides the private {item.name} of an Ultralytics class")
    return out


def package_files() -> list[Path]:
    return sorted(f for f in PKG.rglob("*.py") if SEAM not in f.parents)


def test_no_module_but_the_seam_touches_ultralytics_internals():
    bad = [v for f in package_files() for v in violations(f.read_text(), str(f.relative_to(PKG.parent)))]
    assert not bad, "Ultralytics internals outside attn_yolo/ultralytics_api/:\n" + "\n".join(bad)


def test_the_seam_itself_is_what_the_scan_would_flag():
    """The scan sees the seam's own accesses (so it is not blind to them elsewhere)."""
    found = "\n".join(v for f in sorted(SEAM.glob("*.py")) for v in violations(f.read_text(), f.name))
    for what in ("frame access ._getframe", "frame access .f_locals", "vars() of an Ultralytics module",
                 "getattr(..., '_process_batch')", "overrides the private _process_batch",
                 ".pt_path", "'tloss'", ".ARGV", "= None (Detect's anchor cache)", "assigns __class__",
                 "assigns an instance's forward", "private keyword argument _callbacks=", ".test_loader",
                 ".scale_preds", ".callbacks", ".np"):
        assert what in found, what


PLANTED = {
    "frame locals": ("import sys\nloc = sys._getframe(1).f_locals\n", "frame access"),
    "_getframe import": ("from sys import _getframe\n", "imports sys._getframe"),
    "vars of a module": ("from ultralytics.nn import tasks\nvars(tasks).update({'SE': 1})\n", "vars()"),
    "private name": ("from ultralytics.nn import tasks\nf = tasks._initialize_yolo_model\n", "private Ultralytics"),
    "private via module path": ("import ultralytics.nn.tasks\nultralytics.nn.tasks._x()\n", "private Ultralytics"),
    "private import": ("from ultralytics.nn.tasks import _initialize_yolo_model\n", "imports the private"),
    "module attribute assigned": ("from ultralytics.nn import tasks\ntasks.SE = object()\n", "assigns tasks.SE"),
    "class attribute assigned": ("from ultralytics.nn.modules.block import Attention\nAttention.forward = None\n",
                                 "assigns Attention.forward"),
    "setattr": ("from ultralytics.nn import tasks\nsetattr(tasks, 'SE', 1)\n", "setattr()"),
    "delattr": ("import ultralytics.cfg as c\ndelattr(c, 'X')\n", "delattr()"),
    "del attribute": ("from ultralytics.nn import tasks\ndel tasks.SE\n", "assigns tasks.SE"),
    "private override": ("from ultralytics.models.yolo.detect import DetectionValidator as V\n"
                         "class R(V):\n    def _process_batch(self, p, b):\n"
                         "        return super()._process_batch(p, b)\n",
                         "overrides the private _process_batch"),
    "wrapped attribute": ("def f(yolo):\n    yolo.model.pt_path = 'x.pt'\n", ".pt_path"),
    "wrapped attribute by getattr": ("def f(t):\n    return getattr(t, 'tloss', None)\n", "getattr(..., 'tloss')"),
    "anchor cache": ("def f(head):\n    head.shape = None\n", "Detect's anchor cache"),
    "ARGV": ("import ultralytics.cfg\nultralytics.cfg.ARGV = ['x']\n", ".ARGV"),
    "class swap": ("def f(block, cls):\n    block.__class__ = cls\n", "assigns __class__"),
    "class swap by setattr": ("def f(block, cls):\n    setattr(block, '__class__', cls)\n", "assigns __class__"),
    "instance forward": ("import types\ndef f(m, g):\n    m.forward = types.MethodType(g, m)\n",
                         "assigns an instance's forward"),
    "private keyword": ("from ultralytics.models.yolo.detect import DetectionValidator as V\n"
                        "def f(t):\n    return V(t.loader, _callbacks=t.cb)\n", "private keyword argument _callbacks="),
    "private attribute of a subclass": ("from ultralytics.engine.trainer import BaseTrainer\nclass T(BaseTrainer):\n"
                                        "    def run(self):\n        return self._setup_train()\n",
                                        "private attribute self._setup_train"),
    "trainer's callback lists": ("def f(trainer, fn):\n    trainer.callbacks['on_train_end'].append(fn)\n",
                                 ".callbacks"),
    "layer bookkeeping": ("def f(layer):\n    layer.np = 0\n", ".np"),
    "validator's loader": ("def f(trainer):\n    return trainer.test_loader\n", ".test_loader"),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_scan_flags_a_planted_violation(case):
    source, expected = PLANTED[case]
    found = violations(source)
    assert any(expected in v for v in found), found


def test_scan_passes_public_use():
    """Public Ultralytics API and attn_yolo's own private names pass."""
    source = (
        "from ultralytics import YOLO\nfrom ultralytics.nn.tasks import DetectionModel, yaml_model_load\n"
        "import sys\nclass T(DetectionModel):\n    def fuse(self):\n        return self\n"
        "def _mine():\n    m = YOLO('x.yaml')\n    m.model.names = {0: 'a'}\n"
        "    return sys.argv, m._private_of_a_local\n"
    )
    assert violations(source) == []


def test_the_seam_imports_nothing_of_attn_yolo():
    """The seam sits below every other module (``tests/test_layout.py``: layer 0.5): it imports Ultralytics, torch and
    the standard library only (and ultralytics-thop, which Ultralytics counts GFLOPs with; onnxruntime and NNCF, which
    its INT8 export quantizes with; PyYAML, which reads Ultralytics' default.yaml without importing it, words.py; the
    RNG states of random and numpy, which the dataloader probe keeps, loader.py)."""
    mods = set()
    for f in SEAM.glob("*.py"):
        tree = ast.parse(f.read_text())
        mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in mods if m.split(".")[0] == "attn_yolo" and not m.startswith("attn_yolo.ultralytics_api")}
    allowed = {"__future__", "ast", "collections", "contextlib", "copy", "functools", "importlib", "inspect",
               "logging", "re", "sys", "textwrap", "threading", "types", "pathlib", "typing", "torch", "ultralytics",
               "thop", "attn_yolo",  # thop: ultralytics-thop, the counter of Ultralytics' get_flops (flops.py)
               "nncf", "onnxruntime",  # the quantizers Ultralytics' INT8 export calls, extended there (int8.py)
               "yaml",  # words.py: Ultralytics' cfg/default.yaml read without importing Ultralytics
               "random", "numpy"}  # loader.py: the RNG states the dataloader probe keeps
    assert {m.split(".")[0] for m in mods} <= allowed
