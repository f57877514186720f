"""The ablation's output folder: one ablation at a time (a lock), and only folders the runner made are ever replaced.

Lock: ``out/.attn-yolo-ablate.lock`` is held with ``filelock`` (an OS file lock: released by the kernel when the holder
dies) while an ablation runs; ``out/.attn-yolo-ablate.lock.json`` names the holder (pid, host, start time, command).
A second ablation into the same ``out`` stops at once with a ``UsageError`` naming the holder. A holder file left by
a process that died without releasing the lock is taken over with a warning.

Claim: ``out`` itself holds ``OUT_MARKER`` once the runner has claimed it (written after every check of a run has
passed, before its first write). An existing, non-empty ``out`` without the marker is a folder the user made: it is
refused (``check_out``, before anything is built or written) unless ``overwrite=True``, which lets the ablation write
its own files there (replacing files of the same names, ``OUT_FILES``; deleting nothing it did not write).

Markers: every run folder (``out/runs/<variant>-seed<k>``) and dataset copy (``out/data/<name>``) the runner creates
holds a marker file. Only folders with the marker are deleted or replaced; anything else in the way is refused with
a ``UsageError`` naming the path.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

from attn_yolo.args import UsageError
from attn_yolo.files import atomic_write

LOCK_NAME = ".attn-yolo-ablate.lock"
HOLDER_NAME = ".attn-yolo-ablate.lock.json"
RUN_MARKER = ".attn-yolo-run"  # in each run folder the runner created
DATA_MARKER = ".attn-yolo-data"  # in each dataset copy (copy_data) the runner created
OUT_MARKER = ".attn-yolo-ablate"  # in out, once the runner has claimed it
OUT_FILES = ("config.yaml", "results.csv", "summary.md", "verdicts.json", "ablation.png", "curves.png",
             "delta.png")  # at out's top


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _holder_text(h: dict) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h.get("started", 0)))
    return f"pid {h.get('pid')} on host {h.get('host')}, started {since}"


class OutLock:
    """Exclusive lock on an ablation's ``out`` folder; a context manager (creates ``out``).

    Raises:
        UsageError: another ablation holds the lock (the message names its pid and host).
    """

    def __init__(self, out: Path):
        self.out = Path(out)
        self.holder_file = self.out / HOLDER_NAME
        self._lock = None

    def _read_holder(self) -> dict | None:
        try:
            h = json.loads(self.holder_file.read_text())
        except (OSError, ValueError):
            return None
        return h if isinstance(h, dict) else None

    def _refuse(self, holder: dict | None) -> UsageError:
        who = _holder_text(holder) if holder else "holder unknown"
        return UsageError(f"out={str(self.out)!r} is in use by another ablation ({who}); wait for it to end, or use "
                          "another out=")

    def __enter__(self) -> OutLock:
        from filelock import FileLock, Timeout

        self.out.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.out / LOCK_NAME)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise self._refuse(self._read_holder()) from None
        old = self._read_holder()
        if old is not None:
            same_host = old.get("host") == socket.gethostname()
            if same_host and isinstance(old.get("pid"), int) and old["pid"] != os.getpid() and _alive(old["pid"]):
                lock.release()  # the lock file was removed under a live holder, whose lock is on the old file
                raise UsageError(f"{self._refuse(old)} (if no ablation is running there, delete {self.holder_file})")
            print(f"attn-yolo ablate: warning: {self.holder_file}: taking over the stale lock of the ablation "
                  f"({_holder_text(old)}) that ended without releasing it", file=sys.stderr, flush=True)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "argv": sys.argv}
        atomic_write(self.holder_file, lambda p: Path(p).write_text(json.dumps(info) + "\n"))
        self._lock = lock
        return self

    def __exit__(self, *exc) -> None:
        self.holder_file.unlink(missing_ok=True)
        self._lock.release()
        self._lock = None


def is_ours(folder: Path, marker: str) -> bool:
    """Whether ``folder`` is a real folder (not a link) holding the runner's ``marker`` file."""
    folder = Path(folder)
    return folder.is_dir() and not folder.is_symlink() and (folder / marker).is_file()


def check_replaceable(folder: Path, marker: str) -> None:
    """Refuse a path the runner would replace but did not create (an empty folder is fine: nothing to lose).

    Raises:
        UsageError: ``folder`` exists and is not a folder with ``marker`` (a user's file or folder is never deleted).
    """
    folder = Path(folder)
    empty = folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir())  # nothing to lose
    if (folder.exists() or folder.is_symlink()) and not is_ours(folder, marker) and not empty:
        kind = "folder" if folder.is_dir() and not folder.is_symlink() else "file"
        raise UsageError(f"{folder}: a {kind} that attn-yolo ablate did not create (no {marker} marker) is where the "
                         "ablation writes; move it away or choose another out=")


def claim(folder: Path, marker: str, info: dict) -> Path:
    """Make ``folder`` empty and mark it as the runner's: a folder with ``marker`` is emptied, anything else refused.

    The marker is written first and deleted never, so that a signal at any point leaves a folder that is still
    recognisably the runner's (or an empty one).

    Raises:
        UsageError: see ``check_replaceable``.
    """
    folder = Path(folder)
    check_replaceable(folder, marker)
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"made_by": "attn-yolo ablate", **info}) + "\n"
    if not (folder / marker).exists():
        (folder / marker).write_text(text)
    for child in folder.iterdir():
        if child.name == marker:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    (folder / marker).write_text(text)
    return folder


def check_out(out: Path, overwrite: bool = False) -> None:
    """Refuse an ``out`` the runner has not claimed (no ``OUT_MARKER``) that exists and holds anything (its own lock
    files aside), unless ``overwrite``: nothing is built or written before this check.

    Raises:
        UsageError: one line naming ``out``, what it holds, ``overwrite=True`` and what that replaces.
    """
    out = Path(out)
    if not out.is_dir() or (out / OUT_MARKER).is_file() or overwrite:
        return  # absent (or a file: refused by validate), claimed, or the user allowed it
    held = sorted(p.name + "/" * (p.is_dir() and not p.is_symlink()) for p in out.iterdir()
                  if p.name not in (LOCK_NAME, HOLDER_NAME))
    if held:
        shown = ", ".join(held[:6]) + (f" and {len(held) - 6} more" if len(held) > 6 else "")
        raise UsageError(
            f"attn-yolo ablate: out={str(out)!r} exists and holds {shown}, but attn-yolo ablate did not create it (no "
            f"{OUT_MARKER} marker); choose another out=, or pass overwrite=True to write the ablation there (files "
            f"of its own names are replaced: {', '.join(OUT_FILES)}; nothing else is deleted)"
        )


def claim_out(out: Path) -> None:
    """Mark ``out`` as the runner's (``OUT_MARKER``, kept when there); call only after ``check_out`` and every other
    check of the run."""
    marker = Path(out) / OUT_MARKER
    if not marker.is_file():
        keep_user_files(Path(out))
        info = {"made_by": "attn-yolo ablate", "claimed": time.time(), "argv": sys.argv}
        atomic_write(marker, lambda p: Path(p).write_text(json.dumps(info) + "\n"))


USER_COPY = ".user-copy"  # suffix of the copy of a user's file the ablation replaces (overwrite=True)


def keep_user_files(out: Path) -> list[Path]:
    """Before the runner first writes into an ``out`` it did not create (``overwrite=True``): copy each file there of
    the runner's own names (``OUT_FILES``: the user's, since the runner never wrote there) to ``<name>.user-copy``
    (``-2``, ``-3`` ... when taken) and name each on the terminal; returns the copies."""
    kept = []
    for name in OUT_FILES:
        f = out / name
        if not f.is_file() or f.is_symlink():
            continue
        copy, i = out / f"{name}{USER_COPY}", 1
        while copy.exists():
            i += 1
            copy = out / f"{name}{USER_COPY}-{i}"
        shutil.copy2(f, copy)
        kept.append(copy)
        print(f"attn-yolo ablate: overwrite=True: {f} is replaced by the ablation's own {name}; yours is kept as "
              f"{copy.name}", file=sys.stderr, flush=True)
    return kept


def shown(path) -> str:
    """A path as summary.md and config.yaml show it, never as an absolute path of this machine: relative to the
    working directory when inside it, ``~/...`` under the home folder, else relative to the working directory
    (``../...``)."""
    p = Path(path).expanduser()
    if not p.is_absolute():
        return str(path)
    cwd, home = Path.cwd().resolve(), Path.home().resolve()
    if p.is_relative_to(cwd):
        return str(p.relative_to(cwd)) or "."
    if p.is_relative_to(home) and home != Path(p.anchor):
        return f"~/{p.relative_to(home)}"
    return os.path.relpath(p, cwd)


def portable(config: dict) -> dict:
    """The resolved config as config.yaml holds it: its paths (``data``, ``out``, the config file ``source``, a
    checkpoint ``start``) ``shown``."""
    out = dict(config)
    for key in ("data", "out", "source"):
        if isinstance(out.get(key), str) and out[key] != "synthetic" and not out[key].startswith("<"):
            out[key] = shown(out[key])
    if isinstance(out.get("start"), str) and out["start"].endswith(".pt"):
        out["start"] = shown(out["start"])
    return out
