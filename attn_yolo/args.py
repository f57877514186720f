"""The tools' ``key=value`` arguments: one typed schema per tool (``Key``, ``Schema``), parsed and checked up front.

A tool declares its keys once, as a ``Schema`` of ``Key`` objects (name, type, default, range or choices, help);
``Schema.parse`` reads Ultralytics-style ``key=value`` tokens (values as Ultralytics' ``smart_value`` reads them) and
refuses, before any heavy work, an unknown key (naming the closest one) or a value outside what its key allows, in
one line and one style, ``<key>: <value>; expected <allowed>``: ``attn-yolo heatmap: conf: 2; expected a number in
[0, 1]``, ``attn-yolo heatmap: cnf: unknown key (did you mean 'conf'?); allowed: ...``; the CLI exits 2 on it. A config
file's mapping is checked in the same style (``Schema.check``), every problem collected.
``Schema.rows()`` lists each key as a dict (``name``, ``type``, ``default``, ``allowed``, ``help``), which the CLI
reference is generated from (``attn_yolo_console.TOOLS[name].schema``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from attn_yolo.text import did_you_mean


class UsageError(ValueError):
    """Bad user input (a key, value, file or config row); the CLI prints the message and exits with code 2."""


def yaml_syntax_problem(e: Exception) -> str:
    """A YAML parser's error in one line, where it is first: ``line 3, column 4: expected ',' or ']', but got ':'
    (in the flow sequence that opens at line 2, column 11)`` (lines and columns from 1, as editors count them).

    Args:
        e: a ``yaml.YAMLError``; one without a position (or another exception) is its text on one line.
    """
    problem, mark = getattr(e, "problem", None), getattr(e, "problem_mark", None)
    if not problem or mark is None:
        return " ".join(str(e).split())
    context, at = getattr(e, "context", None), getattr(e, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    if context and at is not None and (at.line, at.column) != (mark.line, mark.column):
        context = context.removeprefix("while ").replace("parsing a ", "the ").replace("scanning a ", "the ")
        return f"{where}: {problem} (in {context} that opens at line {at.line + 1}, column {at.column + 1})"
    return f"{where}: {problem}" + (f" ({context})" if context else "")


def kv_args(argv: list[str], defaults: dict, tool: str) -> dict:
    """Parse Ultralytics-style ``key=value`` arguments against ``defaults`` (values parsed with ``smart_value``).

    Returns:
        dict: ``defaults`` updated with the given values.

    Raises:
        UsageError: for a token without ``=``, or an unknown key: ``attn-yolo <tool>: <key>: unknown key (did you mean
            'x'?); allowed: ...``.
    """
    from ultralytics.cfg import smart_value

    out = dict(defaults)
    for tok in argv:
        key, eq, value = tok.partition("=")
        if not eq or not key:
            raise UsageError(f"attn-yolo {tool}: expected key=value, got {tok!r}; keys: {', '.join(defaults)}")
        if key not in defaults:
            keys = ", ".join(defaults) or "none (it takes no keys)"
            raise UsageError(f"attn-yolo {tool}: {key}: unknown key{did_you_mean(key, defaults)}; allowed: {keys}")
        out[key] = smart_value(value)
    return out


MIN_IMGSZ = 32
"""Smallest image side any tool takes, pixels: the model's largest stride (a P5 map of 1×1)."""
MAX_IMGSZ = 4096
"""Largest image side any tool takes, pixels (export verifies PyTorch and onnxruntime at this size and larger)."""


def _side_ok(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and MIN_IMGSZ <= v <= MAX_IMGSZ


def imgsz_problem(v, pair: bool = False) -> str | None:
    """Why ``v`` is not an image size the tools take, or None: an int in ``MIN_IMGSZ..MAX_IMGSZ`` pixels (rounded up to
    a multiple of the model's stride by Ultralytics' ``check_imgsz``) or, with ``pair``, ``[h, w]`` of two such ints.
    One range for ``attn-yolo export``, ``heatmap``, ``bench``, ``ablate`` (``train.imgsz``) and the pass-through
    commands.

    Returns:
        str | None: the allowed values, e.g. ``"an int in 32..4096 (pixels; ...)"``, for the caller's message.
    """
    if _side_ok(v) or (pair and isinstance(v, (list, tuple)) and len(v) == 2 and all(_side_ok(x) for x in v)):
        return None
    sides = f"an int in {MIN_IMGSZ}..{MAX_IMGSZ} (pixels; rounded up to a multiple of the stride, 32)"
    return sides + (", or h,w of two such ints (e.g. 480,640)" if pair else "")


BATCH_ALLOWED = ("a positive int, -1 (auto batch at 60% of GPU memory) or a float in (0, 1) (auto batch at that "
                 "fraction of GPU memory)")


def batch_problem(v) -> str | None:
    """Why ``v`` is not an Ultralytics training batch, or None: a positive int, -1 (auto batch at 60 % of the GPU
    memory) or a float in (0, 1) (auto batch at that fraction), as ``ultralytics.utils.autobatch`` reads it; any
    other value below 1 would start auto batch at 60 % silently (the rule of an ablation's ``train.batch``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None  # a wrong type is Ultralytics' check_cfg's to name
    if (isinstance(v, int) and (v >= 1 or v == -1)) or (isinstance(v, float) and 0 < v < 1):
        return None
    return BATCH_ALLOWED


# ------------------------------------------------------------------------------------------------------ the schema
TYPES = ("bool", "int", "float", "choice", "str", "path", "imgsz", "list", "any", "section")
"""The kinds of value a ``Key`` takes: ``list`` is comma-separated or ``[a, b]``; ``any`` is checked by the tool;
``section`` is a nested mapping with keys of its own (``Key.schema``), checked by ``Schema.check``."""


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bound(x: float) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"


@dataclasses.dataclass(frozen=True)
class Key:
    """One ``key=value`` argument of a tool.

    Attributes:
        name: the key.
        type: one of ``TYPES``.
        default: the value when the key is not given (None: unset, or the tool's own choice; see ``help``).
        help: one line, for ``<tool> help`` and the CLI reference.
        low, high: the range of an ``int`` / ``float``, inclusive unless ``low_open`` / ``high_open`` (``imgsz``:
            ``MIN_IMGSZ..MAX_IMGSZ``).
        low_open, high_open: the bound itself is refused (``a number > 0``, ``a number in (0, 1)``).
        choices: the values a ``choice`` (case-insensitive) or each item of a ``list`` may take (empty: any).
        pair: an ``imgsz`` may also be ``h,w``.
        note: appended to ``allowed`` in the error (``(the long side)``).
        required: the error when the key is missing (its text after ``<key>= is required``), or None.
        check: ``fn(value) -> why it is wrong or None``, for a rule beyond the type (a perfect square, ...).
        words: what the key takes in words, in place of the ``allowed`` its type and range make (``a number > 0``).
        schema: the keys of a ``section`` (a nested mapping).
    """

    name: str
    type: str
    default: object = None
    help: str = ""
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    pair: bool = False
    note: str = ""
    required: str | None = None
    check: Callable | None = None
    words: str = ""
    schema: Schema | None = None

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"Key {self.name!r}: type {self.type!r}; allowed: {', '.join(TYPES)}")
        if (self.type == "section") != (self.schema is not None):
            raise ValueError(f"Key {self.name!r}: a section has a schema, and only a section")

    @property
    def allowed(self) -> str:
        """What the key takes, in words (the end of its error message)."""
        t = self.type
        if self.words:
            return self.words
        if t == "section":
            return "a mapping with keys " + ", ".join(self.schema.names)
        if t == "bool":
            text = "True or False"
        elif t in ("int", "float"):
            what = "an int" if t == "int" else "a number"
            if self.low > -math.inf and self.high < math.inf:
                text = (f"{what} in {'(' if self.low_open else '['}{_bound(self.low)}, {_bound(self.high)}"
                        f"{')' if self.high_open else ']'}")
            elif self.low > -math.inf:
                text = f"{what} {'>' if self.low_open else '>='} {_bound(self.low)}"
            else:
                text = what
        elif t == "choice":
            text = "one of " + ", ".join(map(str, self.choices))
        elif t == "imgsz":
            text = (f"an int in {MIN_IMGSZ}..{MAX_IMGSZ} (pixels; rounded up to a multiple of the stride, 32)"
                    + (", or h,w of two such ints (e.g. 480,640)" if self.pair else ""))
        elif t == "list":
            text = "a comma-separated list" + (f" of {', '.join(map(str, self.choices))}" if self.choices else "")
        elif t == "path":
            text = "a file or folder path"
        else:
            text = "a string" if t == "str" else "see help"
        return text + (f" {self.note}" if self.note else "") + (" (or none)" if self._none_ok and t != "any" else "")

    @property
    def _none_ok(self) -> bool:
        return self.default is None and self.required is None

    def problem(self, v) -> str | None:
        """Why ``v`` is not a value of this key (``allowed``), or None. A list is returned parsed by ``value``."""
        if v is None and (self._none_ok or self.type == "any"):
            return None
        t, ok = self.type, True
        if t == "bool":
            ok = isinstance(v, bool)
        elif t == "int":
            ok = isinstance(v, int) and not isinstance(v, bool) and self.in_range(v)
        elif t == "float":
            ok = _number(v) and self.in_range(v)
        elif t == "choice":
            ok = str(v).lower() in {str(c).lower() for c in self.choices}
        elif t == "imgsz":  # [640]: one side in a list, as Ultralytics' check_imgsz reads it
            ok = imgsz_problem(v[0] if isinstance(v, list) and len(v) == 1 else v, self.pair) is None
        elif t == "list":
            items = self.value(v)
            ok = bool(items) and (not self.choices or all(i in self.choices for i in items))
        elif t in ("str", "path"):
            ok = isinstance(v, (str, int, float)) and not isinstance(v, bool)
        elif t == "section":
            ok = isinstance(v, dict)
        if not ok:
            return self.allowed
        return self.check(v) if self.check else None

    def in_range(self, v) -> bool:
        """Whether the number ``v`` is within ``low``..``high`` (each bound open or closed as declared)."""
        above = v > self.low if self.low_open else v >= self.low
        return above and (v < self.high if self.high_open else v <= self.high)

    def value(self, v):
        """``v`` as the tool uses it: a ``list`` as a tuple of stripped strings, a ``choice`` lower-cased, an
        ``imgsz`` pair as a tuple; anything else unchanged."""
        if self.type == "list" and v is not None:
            items = v if isinstance(v, (list, tuple)) else str(v).split(",")
            return tuple(str(i).strip() for i in items if str(i).strip())
        if self.type == "choice" and isinstance(v, str):
            return v.lower()
        if self.type == "imgsz" and isinstance(v, list):
            return v[0] if len(v) == 1 else tuple(v)
        return v

    def row(self) -> dict:
        """The key for the CLI reference: ``{"name", "type", "default", "allowed", "help"}``."""
        return {"name": self.name, "type": self.type, "default": self.default, "allowed": self.allowed,
                "help": self.help}


class Schema(tuple):
    """A tool's keys (``Key`` objects, in the order its help lists them)."""

    def __new__(cls, keys=()):
        keys = tuple(keys)
        names = [k.name for k in keys]
        if len(set(names)) != len(names):
            raise ValueError(f"Schema: a key is declared twice: {names}")
        return super().__new__(cls, keys)

    def __getitem__(self, item):
        if isinstance(item, str):
            return next(k for k in self if k.name == item)
        return super().__getitem__(item)

    @property
    def names(self) -> list[str]:
        return [k.name for k in self]

    def defaults(self) -> dict:
        return {k.name: k.default for k in self}

    def rows(self) -> list[dict]:
        """Every key as ``Key.row()``: what the CLI reference prints."""
        return [k.row() for k in self]

    def parse(self, argv: list[str], tool: str) -> dict:
        """``key=value`` tokens → ``{key: value}`` (defaults filled in, values as ``Key.value``), each checked.

        Raises:
            UsageError: ``attn-yolo <tool>: expected key=value, got 'x'``, ``... cnf: unknown key (did you mean
                'conf'?); allowed: ...``, ``... model= is required, ...`` or ``... conf: 2; expected a number in
                [0, 1]``.
        """
        a = kv_args(argv, self.defaults(), tool)
        for k in self:
            v = a[k.name]
            if (v is None or v == "") and k.required is not None:
                raise UsageError(f"attn-yolo {tool}: {k.name}= is required{k.required}")
            if why := k.problem(v):
                raise UsageError(f"attn-yolo {tool}: {k.name}: {v!r}; expected {why}")
            a[k.name] = k.value(v)
        return a

    def check(self, value, where: str = "") -> tuple[dict, list[str]]:
        """A config mapping checked against these keys, every problem collected, none raised: the defaults updated
        with its valid values, and one line per problem in one style: ``<where><key>: <value>; expected <allowed>``,
        ``<where><key>: unknown key (did you mean 'x'?); allowed: ...``. A ``section`` key is checked by its own
        schema, its problems prefixed by its path (``latency.repeats: 0; expected an int in [1, 10000]``).

        Args:
            value: the mapping (None: every default).
            where: the prefix of each problem's key (``""`` at the top, ``"latency."`` in a section).

        Returns:
            ``(values, problems)``.
        """
        out = self.defaults()
        for k in self:
            if k.type == "section":
                out[k.name] = k.schema.defaults()
        if value is None:
            return out, []
        if not isinstance(value, dict):
            return out, [f"{where.rstrip('.') or 'config'}: {value!r}; expected a mapping with keys "
                         f"{', '.join(self.names)}"]
        problems = self.unknown(value, where)
        for k in self:
            if k.name not in value:
                continue
            v = value[k.name]
            if k.type == "section" and (v is None or isinstance(v, dict)):
                out[k.name], p = k.schema.check(v, f"{where}{k.name}.")
                problems += p
            elif why := k.problem(v):
                problems.append(f"{where}{k.name}: {v!r}; expected {why}")
            else:
                out[k.name] = k.value(v)
        return out, problems

    def unknown(self, value: dict, where: str = "") -> list[str]:
        """A line per key of ``value`` not declared here: ``<where><key>: unknown key (did you mean 'x'?); allowed:
        ...`` (the first problems ``check`` lists)."""
        names = self.names
        return [f"{where}{k}: unknown key{did_you_mean(k, names)}; allowed: {', '.join(names)}" for k in value
                if k not in names]

    def walk(self, where: str = ""):
        """Every key of this schema and its sections, depth first: ``(path, key)`` (``latency.repeats``)."""
        for k in self:
            if k.type == "section":
                yield from k.schema.walk(f"{where}{k.name}.")
            else:
                yield f"{where}{k.name}", k

    def help_text(self) -> str:
        """One line per key: ``name=default  help (allowed)``."""
        w = max(len(f"{k.name}={k.default}") for k in self) + 2 if self else 0
        return "\n".join(f"  {f'{k.name}={k.default}':<{w}}{k.help} ({k.allowed})" for k in self)
