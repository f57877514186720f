"""Where an ablation's runs execute: in this process, one worker process per device, or as Ray tasks; and stopping.

Backends (``backend:`` in the config):

- ``local`` without ``devices`` (or with one): every run in this process, one after the other.
- ``local`` with ``devices: [0, 1, ...]``: one worker process per device (spawned, in its own process group), one run
  per device at a time. A worker that dies gives its run a failed record and is replaced.
- ``ray``: every run is a Ray task with ``resources`` (``num_cpus``, ``num_gpus``), placed by Ray's scheduler. Each
  task registers the blocks, trains into a temporary folder on its node and returns the record and the run folder
  (weights, Ultralytics' files) as a tar archive: **copy back**, so ``out`` need not be shared, but the inputs
  (dataset, model YAMLs, pretrained weights) must be at the same path on every node. A task whose worker dies gives a
  failed record. Without ``ray_address`` a local Ray instance is started and shut down here.

The driver (this process) writes every record and run folder; a callback ``on_done(row)`` gets each record.
SIGINT and SIGTERM raise ``KeyboardInterrupt`` (exit code 130 / 143) in the driver; the schedulers then stop their
workers (process groups: SIGTERM, then SIGKILL; Ray: tasks cancelled, a local instance shut down), leaving no process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import signal
import socket
import tarfile
import tempfile
import threading
from pathlib import Path

from attn_yolo.ablate.config.ablation import first_line
from attn_yolo.ablate.runs.records import RunSpec, new_record
from attn_yolo.args import UsageError

STOP_GRACE_S = 5.0  # seconds a stopped worker gets between SIGTERM and SIGKILL
_CLEANING: list = []  # non-empty while a scheduler stops its workers: signals are then recorded, not raised


@contextlib.contextmanager
def stop_on_signals(fired: list):
    """Within the block, SIGINT and SIGTERM raise ``KeyboardInterrupt`` in the main thread and append their number to
    ``fired``. Every signal raises, except while a scheduler stops its workers (``cleaning``), so that cleanup is not
    cut short: a ``KeyboardInterrupt`` that Python discards (raised inside a weakref or ``__del__`` callback, "Exception
    ignored in ...") therefore cannot leave the ablation deaf to the next signal. No-op outside the main thread.
    (Ray's ``wait`` re-raises any exception from a handler as a plain ``KeyboardInterrupt``: ``fired`` is what tells
    SIGTERM from SIGINT.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        fired.append(signum)
        if not _CLEANING:
            raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def cleaning():
    """While a scheduler stops its workers, signals are recorded but raise nothing (see ``stop_on_signals``)."""
    _CLEANING.append(True)
    try:
        yield
    finally:
        _CLEANING.pop()


def exit_code(fired: list) -> int:
    """The exit code after an interruption: 128 + the first signal's number (SIGINT 130, SIGTERM 143); 130 for a
    ``KeyboardInterrupt`` without a signal."""
    return 128 + fired[0] if fired else 130


# --------------------------------------------------------------------------------------------------- local backend


def _worker(runner, device, conn) -> None:
    """A device's worker process: leads its own process group (so that stopping it also stops the processes it
    started, e.g. dataloader workers), leaves Ctrl-C to the driver, then runs the specs it receives until ``None``,
    sending back each record."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while (spec := conn.recv()) is not None:
        try:
            row = runner(spec, device)
        except Exception as e:
            row = new_record(spec, device, error=f"worker process failed: {first_line(e)}")
        conn.send(row)


def stop_process(p, grace: float = STOP_GRACE_S) -> None:
    """Stop a worker process and the process group it leads: SIGTERM, then SIGKILL after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)  # the group exists once the worker called setpgid
        except (ProcessLookupError, PermissionError):
            if p.is_alive():
                os.kill(p.pid, sig)
        p.join(grace if sig == signal.SIGTERM else None)


def schedule_local(specs: list[RunSpec], devices: list, runner, on_start, on_done) -> None:
    """Run ``specs`` in this process (at most one device), else in one worker process per device, one run per device
    at a time. ``on_start(spec, device)`` is called before a run, ``on_done(row)`` after it. A worker that dies gives
    its run a failed record and is replaced."""
    if len(devices) <= 1:
        device = devices[0] if devices else None
        for spec in specs:
            on_start(spec, device)
            on_done(runner(spec, device))
        return

    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")  # CUDA-safe; each worker selects its own device
    todo, idle, busy = list(specs), [(None, None, d) for d in devices], {}  # (process, connection, device)
    try:
        while todo or busy:
            while todo and idle:
                p, conn, device = idle.pop(0)
                if p is None:  # start the device's worker (again, if the last one died)
                    conn, child = ctx.Pipe()
                    p = ctx.Process(target=_worker, args=(runner, device, child), name=f"attn-yolo-ablate {device}")
                    p.start()
                    child.close()
                spec = todo.pop(0)
                on_start(spec, device)
                conn.send(spec)
                busy[conn] = (p, spec, device)
            for conn in wait(list(busy)):
                p, spec, device = busy.pop(conn)
                try:
                    row = conn.recv()
                except EOFError:  # the worker died during the run (killed, segfault, out of memory)
                    p.join()
                    conn.close()
                    row = new_record(spec, device, error=f"worker process died (exit code {p.exitcode})")
                    p = conn = None
                idle.append((p, conn, device))
                on_done(row)
        for p, conn, _ in idle:
            if p is not None:
                conn.send(None)
                p.join()
    finally:
        with cleaning():
            for p, _, _ in [*busy.values(), *idle]:
                if p is not None and p.is_alive():
                    stop_process(p)


# ----------------------------------------------------------------------------------------------------- Ray backend


def ray_device(resources: dict) -> str:
    """The device a Ray task trains on: ``cpu`` without GPUs, else the GPUs Ray assigned (``0`` or ``0,1``, ...:
    Ray sets ``CUDA_VISIBLE_DEVICES``)."""
    n = resources.get("num_gpus", 0)
    return ",".join(str(i) for i in range(max(1, int(n)))) if n else "cpu"


def _pack(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(folder, arcname=".")
    return buf.getvalue()


def _unpack(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: refuse links and paths leaving dest
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def ray_task(runner, spec: RunSpec, device: str) -> tuple[dict, bytes, str]:
    """One run inside a Ray worker: registers the blocks, trains into a temporary folder on this node.

    Returns:
        (record, the run folder as a tar archive, the run folder's path on this node).
    """
    from attn_yolo import synthetic
    from attn_yolo.registry import register

    register()
    with tempfile.TemporaryDirectory(prefix="attn-yolo-ray-") as tmp:
        local = dataclasses.replace(spec, run_dir=str(Path(tmp) / Path(spec.run_dir).name))
        Path(local.run_dir).mkdir()
        name = synthetic.setting_of(spec.data)
        if not Path(spec.data).exists() and name is not None:
            synthetic.default_data_yaml(name)  # `data: synthetic...`, made on this node (same path: same attn-yolo)
        if Path(spec.data).exists():
            row = runner(local, device)
        else:
            row = new_record(local, device, error=f"FileNotFoundError: dataset {spec.data} not found on host "
                             f"{socket.gethostname()}; with backend=ray it must be at the same path on every node")
        return row, _pack(Path(local.run_dir)), local.run_dir


def _rebase(row: dict, old: str, new: str) -> dict:
    """A record made in a worker's folder ``old``, with its paths moved to the driver's run folder ``new``."""
    return {k: new + v[len(old):] if isinstance(v, str) and (v == old or v.startswith(old + "/")) else v
            for k, v in row.items()}  # fmt: skip


def schedule_ray(specs: list[RunSpec], address: str | None, resources: dict, runner, on_start, on_done) -> None:
    """Run ``specs`` as Ray tasks; the records and run folders come back here (``on_done(row)`` after unpacking).

    Args:
        specs: the runs.
        address: Ray cluster address (``auto``, ``ray://host:port``); None: use the Ray session of this process if
            there is one, else start a local instance and shut it down at the end.
        resources: per task: ``num_cpus``, ``num_gpus``.
        runner: ``runner(spec, device) -> row``, executed in the worker (picklable).
        on_start: ``on_start(spec, "ray")``, called as each run is submitted.
        on_done: ``on_done(row)``, called as each run ends, with its run folder unpacked into ``spec.run_dir``.
    """
    import ray
    from ray.exceptions import RayError

    own = not ray.is_initialized()
    if own:
        sigterm = signal.getsignal(signal.SIGTERM)
        kw = {"address": address} if address else {"include_dashboard": False}
        try:
            ray.init(**kw, logging_level="warning")
        except ConnectionError as e:  # no cluster at that address: bad input, said in one line
            raise UsageError(f"ray_address={address!r}: no Ray cluster reachable ({first_line(e, 160)}); start one "
                             "(`ray start --head`), or leave ray_address out to use a local Ray instance") from None
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, sigterm)  # ray.init installs its own SIGTERM handler: keep ours
    device = ray_device(resources)
    task = ray.remote(ray_task).options(num_cpus=resources["num_cpus"], num_gpus=resources["num_gpus"],
                                        max_retries=0, name="attn-yolo-ablate")  # fmt: skip
    pending = {}
    try:
        for spec in specs:
            on_start(spec, "ray")
            pending[task.remote(runner, spec, device)] = spec
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                spec = pending.pop(ref)
                try:
                    row, archive, worker_dir = ray.get(ref)
                except RayError as e:  # the worker died (killed, out of memory, node lost) or the runner raised
                    row = new_record(spec, device, error=f"Ray task failed: {first_line(e)}")
                else:
                    _unpack(archive, Path(spec.run_dir))
                    row = _rebase(row, worker_dir, spec.run_dir)
                on_done(row)
    finally:
        with cleaning():
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if own:
                ray.shutdown()
