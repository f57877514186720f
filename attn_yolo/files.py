"""Writing output files for every tool: atomic writes, a writable folder checked up front, no silent overwrite."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def check_out(path: str | Path, overwrite: bool, key: str = "out", error: type[Exception] = FileExistsError) -> None:
    """Refuse to replace an existing output unless ``overwrite``.

    Raises:
        error: ``"<key>='<path>' exists; pass overwrite=True to replace it"``.
    """
    if Path(path).exists() and not overwrite:
        raise error(f"{key}={str(path)!r} exists; pass overwrite=True to replace it")


def check_writable(path: str | Path, key: str = "out", error: type[Exception] = OSError) -> None:
    """Refuse an output path that cannot be written, before any work: the nearest existing folder on the way must be
    a folder in which a file can be created (probed with a temporary folder, removed at once).

    Catches what a permission check would miss: a path under a file (``a.txt/x``), a read-only or pseudo file system
    (``/sys/x``, ``/proc/x``), a missing permission.

    Raises:
        error: one line naming ``key``, the path and why, e.g. ``out='/sys/x': cannot write in /sys (Operation not
            permitted)``.
    """
    p = Path(path).expanduser().absolute()
    anc = p.parent if p.is_file() else p
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise error(f"{key}={str(path)!r}: {anc} is a file, not a folder, so nothing can be written under it")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".attn-yolo-probe-", dir=anc))
    except OSError as e:
        raise error(f"{key}={str(path)!r}: cannot write in {anc} ({e.strerror or e}); choose another {key}=") from None


def atomic_write(path: str | Path, write) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then move it onto ``path`` (never a half-written file).

    The file gets the permissions a plain ``open(path, "w")`` would give it (``0o666`` less the user's umask), not the
    owner-only ``0o600`` of ``mkstemp``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
