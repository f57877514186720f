"""Rerunning an ablation safely: finished runs are results, never destroyed implicitly.

- ``default_out``: without ``out=`` on the command line, overrides that change what a run trains (``epochs=1``,
  ``imgsz=96``, ``data=...``) name their own folder, ``<out>-epochs1-imgsz96``: two default runs with different
  overrides never share a folder. The embedded default ablation is named after what it runs (``ran_name``: its data
  and arms, ``synthetic-key-cbam``, ``coco128-cbam`` with ``data=path/to/coco128/data.yaml``), in its folder and title.
- ``check_changed``: finished runs in ``out`` whose settings differ from the config's stop the ablation before any
  work (``UsageError``, exit 2), naming the changed keys (``train.epochs: 2 -> 1``) and the runs; the message offers
  ``out=`` (a new folder) or ``redo=True``.
- ``check_seed_design``: the sequential design of seeds chosen by the data (``seeds.min``, ``max``, ``confidence``,
  ``design``, ``spending``, ``looks``) is fitted to the looks it plans; a rerun on finished runs that changes it
  (raising ``max`` included) would pick the design after seeing the data, so it stops before any work (exit 2)
  naming the changed keys; the message offers ``out=`` (a new folder) or the old values. ``precision`` may change.
- With ``redo=True`` a changed run trains into a staging folder ``out/.redo/<variant>-seed<k>`` (``stage``); only
  when it has finished and its record is written does ``promote`` put it in place of the old run folder. A crash or
  a kill during the run leaves the old folder and its ``result.json`` as they were.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path

import yaml

from attn_yolo.ablate.runs.outdir import RUN_MARKER, check_replaceable, is_ours
from attn_yolo.ablate.runs.records import RECORD_NAME
from attn_yolo.args import UsageError
from attn_yolo.files import atomic_write

STAGING = ".redo"  # out/.redo/<variant>-seed<k>: a redone run until it has finished
OUT_KEYS_IGNORED = {"out", "device", "plots", "verbose", "devices", "backend", "ray_address", "resources", "seeds",
                    "latency", "bootstrap", "copy_data", "trust"}  # overrides that change no run's result
SUFFIX_MAX = 48  # characters of the settings suffix of a default out; longer ones end in a hash


FLAGS = ("redo", "overwrite")  # command-line switches of the run, not config keys


def split_flags(overrides: list[str]) -> tuple[list[str], dict[str, bool]]:
    """Take ``redo=`` and ``overwrite=`` (``True`` / ``False``) out of the command-line overrides.

    Returns:
        (the other overrides, ``{"redo": bool, "overwrite": bool}``).

    Raises:
        UsageError: a flag with another value.
    """
    rest, flags = [], dict.fromkeys(FLAGS, False)
    for tok in overrides:
        key, _, value = tok.partition("=")
        if key not in FLAGS:
            rest.append(tok)
            continue
        if value.lower() not in ("true", "false"):
            raise UsageError(f"attn-yolo ablate: {key}={value!r}; expected True or False")
        flags[key] = value.lower() == "true"
    return rest, flags


def _token(value) -> str:
    text = Path(value).stem if isinstance(value, str) and ("/" in value or value.endswith((".yaml", ".yml"))) else value
    return re.sub(r"[^A-Za-z0-9.]+", "", str(text).replace("True", "true").replace("False", "false"))


def ran_name(raw: dict) -> str:
    """What an ablation runs, as a name: its data and its arms, ``synthetic-key-cbam``, ``coco128-cbam-se`` (a dataset
    YAML by its file name, or its folder's for a ``data.yaml``; the arms: every variant but the baseline, the one with
    ``baseline: true`` or else the first). Characters other than letters, digits, ``.`` and ``_`` become ``-``; a long
    name ends in a hash. Used for the embedded default, whose own name (``synthetic-quick``) says neither."""
    data = raw.get("data")
    path = Path(str(data)) if data is not None else Path("nodata")
    data = path.parent.name if path.stem in ("data", "dataset") and path.parent.name else path.stem
    variants = [v for v in raw.get("variants") or [] if isinstance(v, dict)]
    flagged = [v for v in variants if v.get("baseline") is True]
    arms = [str(v.get("name")) for v in variants if v is not (flagged[0] if flagged else variants[0])]
    name = re.sub(r"[^A-Za-z0-9._]+", "-", "-".join([data, *arms])).strip("-") or "ablation"
    if len(name) > SUFFIX_MAX:
        name = f"{name[:SUFFIX_MAX - 9]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return name


def default_out(raw: dict, overrides: list[str], name: str, named: tuple = ()) -> dict:
    """``raw`` with ``out`` suffixed by the overrides that change what a run trains, unless ``out=`` was given.

    ``attn-yolo ablate epochs=1 imgsz=96`` writes to ``runs/ablate/synthetic-key-cbam-epochs1-imgsz96``; overrides that
    change no result (``device``, ``seeds``, ``devices``, ``verbose``, ...) keep the config's ``out``, and so do the
    keys ``named`` already says (the embedded default's ``data`` and ``variants``, in its ``ran_name``).
    """
    keys = [tok.partition("=") for tok in overrides]
    if any(k == "out" for k, _, _ in keys):
        return raw
    parts = [f"{k}{_token(v)}" for k, _, v in keys if k not in OUT_KEYS_IGNORED and k.split(".")[0] not in named]
    if not parts:
        return raw
    suffix = "-".join(parts)
    if len(suffix) > SUFFIX_MAX:
        suffix = f"{suffix[:SUFFIX_MAX - 9]}-{hashlib.sha256(suffix.encode()).hexdigest()[:8]}"
    out = raw.get("out", f"runs/ablate/{name}")
    return {**raw, "out": f"{str(out).rstrip('/')}-{suffix}" if isinstance(out, str) and out else out}


def previous_config(out: Path) -> dict | None:
    """The resolved config an earlier ablation wrote to ``out/config.yaml``; None when there is none (or unreadable)."""
    try:
        old = yaml.safe_load((Path(out) / "config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return old if isinstance(old, dict) else None


def _short(v) -> str:
    s = yaml.safe_dump(v, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()
    return s if len(s) <= 60 else s[:57] + "..."


def changed_keys(old: dict | None, new: dict, ignored_train: set) -> list[str]:
    """The settings that differ between an earlier resolved config and this one, as ``key: old -> new``."""
    if old is None:
        return ["(no config.yaml from the earlier ablation: its settings fingerprint differs)"]
    out = []
    if old.get("data") != new.get("data"):
        out.append(f"data: {_short(old.get('data'))} -> {_short(new.get('data'))}")
    old_train, new_train = old.get("train") or {}, new.get("train") or {}
    for k in sorted(set(old_train) | set(new_train)):
        if k not in ignored_train and old_train.get(k) != new_train.get(k):
            out.append(f"train.{k}: {_short(old_train.get(k, '(unset)'))} -> {_short(new_train.get(k, '(unset)'))}")
    old_nb, new_nb = old.get("new_blocks") or {}, new.get("new_blocks") or {}
    for k in sorted(set(old_nb) | set(new_nb)):  # how the arms' new blocks train (attn_yolo.ablate.statistics.treatment)
        if old_nb.get(k) != new_nb.get(k):
            out.append(f"new_blocks.{k}: {_short(old_nb.get(k, '(unset)'))} -> {_short(new_nb.get(k, '(unset)'))}")
    old_v = {v.get("name"): v for v in old.get("variants") or [] if isinstance(v, dict)}
    for v in new.get("variants") or []:
        if isinstance(v, dict) and v.get("name") in old_v and old_v[v["name"]] != v:
            w = old_v[v["name"]]
            keys = [k for k in sorted(set(w) | set(v)) if w.get(k) != v.get(k)]  # name the keys, not the whole spec
            out += [f"variants ({v['name']}).{k}: {_short(w.get(k, '(unset)'))} -> {_short(v.get(k, '(unset)'))}"
                    for k in keys]
    return out or ["a model YAML's or the dataset YAML's content: the settings fingerprint differs"]


def check_changed(out: Path, changed: list[tuple[str, int]], old: dict | None, new: dict, ignored_train: set,
                  redo: bool) -> None:
    """Stop before any work when finished runs in ``out`` used other settings, unless ``redo``.

    Raises:
        UsageError: naming the changed keys and the runs, offering ``out=`` or ``redo=True``.
    """
    if not changed or redo:
        return
    runs = ", ".join(f"{v}-seed{s}" for v, s in changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8
                                                                else "")
    keys = "; ".join(changed_keys(old, new, ignored_train))
    raise UsageError(
        f"attn-yolo ablate: {len(changed)} finished run(s) in {out} used other settings ({keys}): {runs}. Nothing was "
        f"changed. To keep them, pass out=<new folder>; to replace them, pass redo=True (each old run folder is "
        f"replaced only after its new run has finished)"
    )


SEED_DESIGN_KEYS = ("min", "max", "confidence", "design", "spending", "looks")
EARLIER_DESIGN = "(the confidence sequence of versions before the alpha-spending design)"


def check_seed_design(out: Path, old: dict | None, new: dict, finished: int) -> None:
    """Stop before any work when ``finished`` runs in ``out`` were read under another sequential design.

    ``old`` / ``new``: the earlier and this resolved config; their ``seeds`` (a dict: seeds chosen by the data) are
    compared on ``SEED_DESIGN_KEYS``. A config without ``seeds.design`` was written by an earlier version.

    Raises:
        UsageError: naming each changed key (``seeds.max: 6 -> 12``).
    """
    was, now = (old or {}).get("seeds"), new.get("seeds")
    if not finished or not isinstance(was, dict) or not isinstance(now, dict):
        return
    was = {"design": EARLIER_DESIGN, "spending": now.get("spending"), "looks": None} | was
    keys = [f"seeds.{k}: {_short(was.get(k))} -> {_short(now.get(k))}" for k in SEED_DESIGN_KEYS
            if was.get(k) != now.get(k)]
    if keys:
        raise UsageError(
            f"attn-yolo ablate: {'; '.join(keys)}: the {finished} finished run(s) in {out} were read under the "
            "sequential design of the earlier seeds, whose boundaries are fitted to its looks; changing it on the "
            "same runs would choose the design after seeing the data and void the guarantee. Nothing was changed. "
            "Keep the earlier seeds values, or pass out=<new folder> to start a new design")


def stage(spec, out: Path):
    """``spec`` training into ``out/.redo/<run folder name>`` instead of its run folder (checked replaceable)."""
    staging = Path(out) / STAGING / Path(spec.run_dir).name
    check_replaceable(staging, RUN_MARKER)
    return dataclasses.replace(spec, run_dir=str(staging))


def _rebase(row: dict, old: str, new: str) -> dict:
    return {k: new + v[len(old):] if isinstance(v, str) and (v == old or v.startswith(old + "/")) else v
            for k, v in row.items()}  # fmt: skip


def promote(row: dict, staged_dir: str, final_dir: str) -> dict:
    """Put a finished staged run in place of the old run folder and return its record (paths in the final folder).

    Order: the record is written into the staging folder, the old folder is moved aside (``out/.redo/<name>.old``),
    the staged one renamed into place, then the old one deleted: at every point one complete record of the run
    exists. A failed run is promoted too (the old folder held a record of other settings)."""
    staged, final = Path(staged_dir), Path(final_dir)
    row = {**_rebase(row, staged_dir, final_dir), "run_dir": final_dir}
    atomic_write(staged / RECORD_NAME, lambda p: Path(p).write_text(json.dumps(row, indent=1) + "\n"))
    aside = staged.with_name(f"{staged.name}.old")
    if is_ours(aside, RUN_MARKER):
        shutil.rmtree(aside)
    if final.exists():
        final.rename(aside)
    staged.rename(final)
    if aside.exists():
        shutil.rmtree(aside)
    return row
