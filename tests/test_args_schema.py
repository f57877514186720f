"""The tools' typed key=value schema (``attn_yolo.args.Key`` / ``Schema``): each type's check and error text, unknown
keys with the closest match, required keys, and every tool exposing its keys for the CLI reference."""

from __future__ import annotations

import math

import pytest

import attn_yolo_console as console
from attn_yolo import cli
from attn_yolo.args import MAX_IMGSZ, MIN_IMGSZ, TYPES, Key, Schema, UsageError

SCHEMA = Schema([
    Key("flag", "bool", False, help="a switch"),
    Key("n", "int", 3, help="a count", low=1, high=10),
    Key("ratio", "float", 0.5, help="a share", low=0, high=1),
    Key("mode", "choice", "fast", help="how", choices=("fast", "slow")),
    Key("size", "imgsz", 640, help="pixels", pair=True),
    Key("parts", "list", "a,b", help="which", choices=("a", "b", "c")),
    Key("out", "path", help="where"),
    Key("src", "path", help="input", required=", e.g. src=img.jpg"),
    Key("odd", "int", 1, help="an odd int", check=lambda v: None if v % 2 else "an odd int"),
])  # fmt: skip


def error(argv: list[str]) -> str:
    with pytest.raises(UsageError) as e:
        SCHEMA.parse(["src=x.jpg", *argv], "demo")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("attn-yolo demo: ")
    return msg


@pytest.mark.parametrize(("argv", "expected"), [
    (["flag=1"], "flag: 1; expected True or False"),
    (["flag=yes"], "flag: 'yes'; expected True or False"),
    (["n=0"], "n: 0; expected an int in [1, 10]"),
    (["n=11"], "n: 11; expected an int in [1, 10]"),
    (["n=2.5"], "n: 2.5; expected an int in [1, 10]"),
    (["n=True"], "n: True; expected an int in [1, 10]"),
    (["ratio=1.5"], "ratio: 1.5; expected a number in [0, 1]"),
    (["ratio=abc"], "ratio: 'abc'; expected a number in [0, 1]"),
    (["mode=medium"], "mode: 'medium'; expected one of fast, slow"),
    (["size=16"], f"size: 16; expected an int in {MIN_IMGSZ}..{MAX_IMGSZ}"),
    (["size=1,2,3"], "or h,w of two such ints"),
    (["parts=a,d"], "parts: 'a,d'; expected a comma-separated list of a, b, c"),
    (["out=True"], "out: True; expected a file or folder path (or none)"),
    (["odd=4"], "odd: 4; expected an odd int"),
])  # fmt: skip
def test_each_type_names_the_key_the_value_and_what_is_allowed(argv, expected):
    assert expected in error(argv)


def test_unknown_key_names_the_closest_and_a_token_without_equals():
    assert "ration: unknown key (did you mean 'ratio'?); allowed: flag, n, ratio," in error(["ration=0.1"])
    assert "zzz: unknown key; allowed:" in error(["zzz=1"]) and "did you mean" not in error(["zzz=1"])
    assert "expected key=value, got 'flag'" in error(["flag"])


def test_required_key_and_parsed_values():
    with pytest.raises(UsageError, match=r"^attn-yolo demo: src= is required, e.g. src=img.jpg$"):
        SCHEMA.parse([], "demo")
    a = SCHEMA.parse(["src=x.jpg", "mode=SLOW", "size=480,640", "parts=c, a", "flag=True", "ratio=1"], "demo")
    assert a == {"flag": True, "n": 3, "ratio": 1, "mode": "slow", "size": (480, 640), "parts": ("c", "a"),
                 "out": None, "src": "x.jpg", "odd": 1}
    assert SCHEMA.parse(["src=x.jpg", "size=[640]"], "demo")["size"] == 640  # one side in a list, as check_imgsz


def test_a_schema_refuses_a_bad_declaration():
    with pytest.raises(ValueError, match="type 'number'"):
        Key("x", "number")
    with pytest.raises(ValueError, match="declared twice"):
        Schema([Key("x", "bool"), Key("x", "int")])


def test_rows_are_the_cli_reference():
    rows = SCHEMA.rows()
    assert [r["name"] for r in rows] == SCHEMA.names
    assert rows[1] == {"name": "n", "type": "int", "default": 3, "allowed": "an int in [1, 10]", "help": "a count"}
    assert Key("k", "float", low=0).allowed == "a number >= 0 (or none)"
    assert Key("k", "float", low=0, high=math.inf).problem(1e9) is None


def test_every_tool_exposes_its_keys():
    """``TOOLS[name].schema.rows()``: what the generated CLI reference lists; every key typed and helped, and the
    schema's defaults are the tool's (``DEFAULTS``)."""
    import importlib

    for name, tool in console.TOOLS.items():
        schema = tool.schema
        if schema is None:  # ablate, search: a config and its dotted overrides
            assert name in ("ablate", "search")
            continue
        for row in schema.rows():
            assert row["type"] in TYPES and row["allowed"] and (row["help"] or name == "modules"), (name, row)
        module = importlib.import_module(tool.entry.partition(":")[0])
        if hasattr(module, "DEFAULTS") and name != "modules":
            assert module.DEFAULTS == schema.defaults(), name
    assert console.TOOLS["heatmap"].schema["conf"].allowed == "a number in [0, 1]"
    assert cli.OWN_KEYS == {"trust": False, "health": True, "sdpa": False}


@pytest.mark.parametrize(("argv", "expected"), [
    (["heatmap", "model=x.pt", "conf=2"], "attn-yolo heatmap: conf: 2; expected a number in [0, 1]"),
    (["export", "model=x.pt", "dynamic=1"], "attn-yolo export: dynamic: 1; expected True or False"),
    (["insert", "base=yolo11n.yaml", "trust=2"], "attn-yolo insert: trust: 2; expected True or False"),
    (["bench", "threads=-1"], "attn-yolo bench: threads: -1; expected an int >= 0"),
    (["explain", "out=x", "cam=foo"], "attn-yolo explain: cam: 'foo'; expected one of eigencam, gradcam"),
    (["modules", "x=1"], "attn-yolo modules: x: unknown key; allowed: none (it takes no keys)"),
    (["heatmap", "model=x.pt", "imsz=64"], "attn-yolo heatmap: imsz: unknown key (did you mean 'imgsz'?); allowed: "),
])  # fmt: skip
def test_the_cli_exits_2_with_the_schemas_line(argv, expected, capsys):
    assert console.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and expected in err and len(err.splitlines()) == 1, err
