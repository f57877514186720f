"""Config checked by declaration: every key the ablation declares (``validate.DECLARED``, sections nested) refuses
each bad value with one line in one style, ``<key>: <value>; expected <allowed>``, and an unknown key of a section
with the closest key. The cases are generated from the declarations, not written per key: a key declared later is
tested too."""

import math

import pytest

from attn_yolo.ablate import validate
from attn_yolo.ablate.config.ablation import ConfigError
from attn_yolo.ablate.config.validate import DECLARED
from attn_yolo.args import Key, Schema


def bad_values(key: Key) -> list:
    """Values outside what ``key`` declares, from its type and range."""
    if key.type in ("int", "float"):
        out = ["x", True]
        if key.low > -math.inf:
            out.append(key.low - 1)
        if key.high < math.inf:
            out.append(key.high + 1)
        if key.low_open or (key.check is not None and key.low > -math.inf):
            out.append(key.low)  # on the declared edge: an open bound (or the key's own rule) refuses it
        if key.high_open:
            out.append(key.high)
        return out
    if key.type == "bool":
        return [3, "yes"]
    if key.type in ("choice", "any"):
        return ["nope", 7]
    raise AssertionError(f"no bad value generated for a {key.type} key: add one here")


def nested(path: str, value) -> dict:
    head, _, rest = path.partition(".")
    return {head: nested(rest, value) if rest else value}


CASES = [(path, key, bad) for path, key in DECLARED.walk() for bad in bad_values(key)]


@pytest.mark.parametrize(("path", "key", "bad"), CASES, ids=[f"{p}={b!r}" for p, _, b in CASES])
def test_every_declared_key_refuses_a_bad_value_in_one_line(tmp_path, path, key, bad):
    with pytest.raises(ConfigError) as e:
        validate(nested(path, bad), tmp_path)
    mine = [p for p in e.value.problems if p.startswith(f"{path}:")]
    assert mine == [f"{path}: {bad!r}; expected {key.allowed}"]
    assert "\n" not in mine[0]


SECTIONS = [k for k in DECLARED if k.type == "section"]


@pytest.mark.parametrize("section", SECTIONS, ids=[k.name for k in SECTIONS])
def test_an_unknown_key_of_a_section_names_the_closest(tmp_path, section):
    first = section.schema.names[0]
    with pytest.raises(ConfigError) as e:
        validate({section.name: {first[:-1]: 1}}, tmp_path)
    want = (f"{section.name}.{first[:-1]}: unknown key (did you mean {first!r}?); allowed: "
            f"{', '.join(section.schema.names)}")
    assert any(p.startswith(want) for p in e.value.problems), e.value.problems  # seeds: "(or a list of seeds)"
    with pytest.raises(ConfigError) as e:
        validate({section.name: 3}, tmp_path)
    if section.words:  # a section that takes another form too (seeds: a list): its own check's line
        assert [p for p in e.value.problems if p.startswith(f"{section.name}: 3; expected ")], e.value.problems
    else:
        assert f"{section.name}: 3; expected {section.allowed}" in e.value.problems


def test_valid_values_and_defaults_come_back_from_the_declaration():
    schema = Schema([Key("a", "int", 1, low=0), Key("s", "section", schema=Schema([Key("b", "float", 0.5, low=0)]))])
    assert schema.check(None) == ({"a": 1, "s": {"b": 0.5}}, [])
    assert schema.check({"a": 3, "s": {"b": 2}}) == ({"a": 3, "s": {"b": 2}}, [])
    values, problems = schema.check({"a": -1, "s": {"b": -2, "c": 1}})
    assert values == {"a": 1, "s": {"b": 0.5}}  # a bad value keeps the default
    assert problems == ["a: -1; expected an int >= 0", "s.c: unknown key; allowed: b",
                        "s.b: -2; expected a number >= 0"]
    assert [p for p, _ in schema.walk()] == ["a", "s.b"]
