"""Each block is declared once: no dict literal in the package is keyed by a block's name or class outside the
declarations (``@declare(...)`` in the block's own file), and the declarations state what the tools read."""

import ast
from pathlib import Path

import attn_yolo
from attn_yolo.registry import DECLARATIONS

PKG = Path(attn_yolo.__file__).parent


def _block_key(k, names: set[str], classes: set[str]) -> bool:
    if isinstance(k, ast.Constant) and isinstance(k.value, str):
        return k.value in names
    if isinstance(k, ast.Name):
        return k.id in classes
    if isinstance(k, ast.Tuple):  # ("SE", "r"), (MHSA, "heads")
        return any(_block_key(e, names, classes) for e in k.elts)
    return False


def block_keyed_dicts(tree: ast.AST, names: set[str], classes: set[str]) -> list[int]:
    """Line numbers of the dict literals in ``tree`` with a key naming a block (its YAML name, an alias or its
    class), except those inside a ``declare(...)`` call."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "declare":
            inside |= {id(n) for n in ast.walk(node)}
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Dict) and id(n) not in inside
            and any(k is not None and _block_key(k, names, classes) for k in n.keys)]


def test_no_table_keyed_by_block_outside_the_declarations():
    names = {n for n, d in DECLARATIONS.items()} | {a for d in DECLARATIONS.values() for a in d.aliases}
    classes = {d.cls.__name__ for d in DECLARATIONS.values()}
    found = {str(f.relative_to(PKG)): lines for f in sorted(PKG.rglob("*.py"))
             if (lines := block_keyed_dicts(ast.parse(f.read_text()), names, classes))}
    assert found == {}


def test_the_scan_finds_a_planted_table():
    """The scan would see a table of the old kind (by name, by class, by (name, param))."""
    names, classes = {"SE", "CA"}, {"SE"}
    code = 'A = {"SE": 1}\nB = {SE: 2}\nC = {("CA", "r"): 3}\nD = {"conv": 4}\nE = declare("SE", x={"CA": 1})\n'
    assert block_keyed_dicts(ast.parse(code), names, classes) == [1, 2, 3]


def test_every_block_declares_what_the_tools_read():
    """Each declaration names its class, its params in constructor order with their defaults, a citation (attention
    blocks), an export minimum, and gate paths that exist on a built block."""
    import inspect

    for name, d in DECLARATIONS.items():
        assert d.cls.declaration is d and d.name == name
        sig = inspect.signature(d.cls).parameters
        assert [p.name for p in d.params] == [p for p in sig if p != "c1"]
        assert all(p.default == sig[p.name].default for p in d.params)
        if d.control:
            continue
        assert d.paper and d.min_opset >= 9 and d.cls.__module__ == f"attn_yolo.nn.{d.cls.__module__.split('.')[-1]}"
        block = d.cls(64)
        assert all(block.get_submodule(g) is not None for g in d.gates)
        assert d.gates or d.attention_weights or name == "BiLevelRoutingAttention"
