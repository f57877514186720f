"""The steps every ``attn-yolo export`` flow shares.

Its usage error, the model's load, the refusal to replace an output, the printed report and the exit code.
"""

from __future__ import annotations

from pathlib import Path

from attn_yolo.args import UsageError
from attn_yolo.checkpoint import load_yolo
from attn_yolo.files import check_writable


def usage(msg: str) -> UsageError:
    """The export tool's usage error (exit 2): ``attn-yolo export: <msg>``."""
    return UsageError(f"attn-yolo export: {msg}")


def load_model(a: dict):
    """Load ``model=`` (weights-only unless ``trust=True``) as a ``YOLO``.

    Raises:
        UsageError: a file that does not exist or is not a checkpoint / model YAML.
    """
    try:
        return load_yolo(a["model"], "model", trust=a["trust"])
    except ValueError as e:
        raise usage(str(e)) from None


def refuse_to_replace(targets: list[tuple[Path, str]], overwrite: bool, keep: str = "") -> None:
    """Refuse, before any export, each ``(path, what)`` that exists (unless ``overwrite``) or cannot be written.

    Raises:
        UsageError: ``<what> '<path>' exists; pass overwrite=True to replace it<keep>``, or an unwritable ``out=``.
    """
    for p, what in targets:
        if p.exists() and not overwrite:
            raise usage(f"{what} {str(p)!r} exists; pass overwrite=True to replace it{keep}")
        check_writable(p, "out", usage)


def print_report(report, path: Path, failed: str) -> int:
    """Print ``report``'s summary and where it was saved (``path``), and ``failed`` if a check failed.

    Returns:
        int: 0 if every check that ran passed, else 1.
    """
    print(report.summary())
    print(f"Report saved to {path}")
    if not report.passed:
        print(failed)
    return 0 if report.passed else 1
