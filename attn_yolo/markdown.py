"""The reports' Markdown model: a section (heading, body lines, tables), a table, and their rendering.

The ablation's summary, the search's summary, ``explain.md``, the attention-health section and the benchmarks build
their reports as a list of ``Section`` and render them with ``render``: the data is made first, the text from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


def table(headers: Iterable, rows: Iterable[Iterable]) -> str:
    """A Markdown table; ``None`` cells print as an em dash, ``|`` inside a cell is escaped."""
    cell = lambda v: "—" if v is None else str(v).replace("|", "\\|")  # noqa: E731
    headers = list(headers)
    lines = ["| " + " | ".join(map(str, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join([*lines, *("| " + " | ".join(cell(v) for v in r) + " |" for r in rows)])


@dataclass
class Section:
    """One section of a report: a heading (``title``, at ``level``: 1 ``#``, 2 ``##``, ...; None: no heading) and its
    body, Markdown lines (a table from ``table`` is one entry)."""

    title: str | None
    body: list[str] = field(default_factory=list)
    level: int = 2

    def lines(self) -> list[str]:
        """The section's Markdown lines: the heading and a blank line, the body, a blank line."""
        head = [f"{'#' * self.level} {self.title}"] if self.title is not None else []
        return [*head, *([""] if head and self.body else []), *self.body, ""]


def render(sections: Iterable[Section | None]) -> str:
    """The Markdown of ``sections`` in order (None entries, sections a report leaves out, are skipped)."""
    return "\n".join(x for s in sections if s is not None for x in s.lines()).rstrip("\n") + "\n"
