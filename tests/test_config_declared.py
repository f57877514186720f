"""Config checked by declaration: every key the ablation (``validate.DECLARED``) and the search
(``search.config.SEARCH``) declare, sections nested, refuses each bad value with one line in one style, ``<key>:
<value>; expected <allowed>``, and an unknown key of a section with the closest key. The cases are generated from the
declarations, not written per key: a key declared later is tested too."""

import math

import pytest

from attn_yolo.ablate import validate
from attn_yolo.ablate.config.ablation import ConfigError
from attn_yolo.ablate.config.validate import DECLARED
from attn_yolo.args import Key, Schema
from attn_yolo.search.config import SEARCH, check_section


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
    if key.type == "choice" or (key.type == "any" and key.check is not None):
        return ["nope", 7]
    if key.type == "any":
        return []  # its own function checks it after the shape check (search.model: the model is loaded)
    raise AssertionError(f"no bad value generated for a {key.type} key: add one here")


def _sections(schema: Schema, where: str = ""):
    """Every section of ``schema``, nested ones too: ``(the prefix of its path, its Key)``."""
    for k in schema:
        if k.type == "section":
            yield where, k
            yield from _sections(k.schema, f"{where}{k.name}.")


def nested(path: str, value) -> dict:
    head, _, rest = path.partition(".")
    return {head: nested(rest, value) if rest else value}


CONFIGS = {"ablation": DECLARED, "search": Schema([Key("search", "section", schema=SEARCH)])}


def problems_of(config: str, raw: dict, tmp_path) -> list[str]:
    """Every problem the ablation's ``validate`` or the search's ``check_section`` finds in ``raw``."""
    if config == "search":
        return check_section(raw)[-1]
    with pytest.raises(ConfigError) as e:
        validate(raw, tmp_path)
    return e.value.problems


CASES = [(c, path, key, bad) for c, schema in CONFIGS.items() for path, key in schema.walk() for bad in bad_values(key)]


@pytest.mark.parametrize(("config", "path", "key", "bad"), CASES, ids=[f"{p}={b!r}" for _, p, _, b in CASES])
def test_every_declared_key_refuses_a_bad_value_in_one_line(tmp_path, config, path, key, bad):
    mine = [p for p in problems_of(config, nested(path, bad), tmp_path) if p.startswith(f"{path}:")]
    assert mine == [f"{path}: {bad!r}; expected {key.allowed}"]
    assert "\n" not in mine[0]


def test_the_search_and_the_ablation_declare_many_keys():
    """The generated cases cover every section (a walk that found nothing would pass the test above vacuously)."""
    paths = {p for _, p, _, _ in CASES}
    for want in ("latency.repeats", "new_blocks.lr_mult", "treatment.threshold", "seeds.looks", "search.precision",
                 "search.max_runs", "search.placebo", "search.seeds.min", "search.seeds.spending"):
        assert want in paths


SECTIONS = [(c, where, k) for c, schema in CONFIGS.items() for where, k in _sections(schema)]


@pytest.mark.parametrize(("config", "where", "section"), SECTIONS, ids=[w + k.name for _, w, k in SECTIONS])
def test_an_unknown_key_of_a_section_names_the_closest(tmp_path, config, where, section):
    path, first = where + section.name, section.schema.names[0]
    problems = problems_of(config, nested(f"{path}.{first[:-1]}", 1), tmp_path)
    want = f"{path}.{first[:-1]}: unknown key (did you mean {first!r}?); allowed: {', '.join(section.schema.names)}"
    assert any(p.startswith(want) for p in problems), problems  # seeds: "(or a list of seeds)" after it
    problems = problems_of(config, nested(path, 3), tmp_path)
    if section.words:  # a section that takes another form too (seeds: a list): its own check's line
        assert [p for p in problems if p.startswith(f"{path}: 3; expected ")], problems
    else:
        assert f"{path}: 3; expected {section.allowed}" in problems


def test_valid_values_and_defaults_come_back_from_the_declaration():
    schema = Schema([Key("a", "int", 1, low=0), Key("s", "section", schema=Schema([Key("b", "float", 0.5, low=0)]))])
    assert schema.check(None) == ({"a": 1, "s": {"b": 0.5}}, [])
    assert schema.check({"a": 3, "s": {"b": 2}}) == ({"a": 3, "s": {"b": 2}}, [])
    values, problems = schema.check({"a": -1, "s": {"b": -2, "c": 1}})
    assert values == {"a": 1, "s": {"b": 0.5}}  # a bad value keeps the default
    assert problems == ["a: -1; expected an int >= 0", "s.c: unknown key; allowed: b",
                        "s.b: -2; expected a number >= 0"]
    assert [p for p, _ in schema.walk()] == ["a", "s.b"]


# The keys checked by functions (they need files, models or the registry): their shape problems in the same style.
CHECKED = [("data", 3), ("train", [1]), ("reference", 5), ("out", 4),
           ("variants.1.baseline", "yes"), ("variants.1.args", 16), ("variants.1.base", 3), ("variants.0.model", 7)]


@pytest.mark.parametrize(("path", "bad"), CHECKED, ids=[p for p, _ in CHECKED])
def test_a_key_its_function_checks_answers_in_the_same_style(tmp_path, path, bad):
    raw = {"data": "synthetic", "variants": [{"name": "baseline", "model": "yolo11n.yaml"},
                                            {"name": "cbam", "base": "yolo11n.yaml", "module": "CBAM", "at": "neck"}]}
    if path.startswith("variants."):
        _, i, key = path.split(".")
        raw["variants"][int(i)][key] = bad
        where = f"variants[{i}] ({raw['variants'][int(i)]['name']}).{key}"
    else:
        raw[path], where = bad, path
    mine = [p for p in problems_of("ablation", raw, tmp_path) if p.startswith(f"{where}:")]
    assert len(mine) == 1 and mine[0].startswith(f"{where}: {bad!r}; expected "), mine
