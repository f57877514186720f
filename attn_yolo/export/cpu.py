"""The CPU an INT8 latency was measured on: its name and INT8 instructions (VNNI, AMX); when INT8 is slower, why.

INT8 pays on a CPU only where the runtime has 8-bit dot-product instructions to run it on: VNNI (``avx512_vnni``,
``avx_vnni``: 8-bit multiply-accumulate in one instruction) or AMX (``amx_int8``: 8-bit tile matrix multiply).
Without them an 8-bit convolution is emulated with wider instructions, and ONNX Runtime's QDQ graph also pays for
every QuantizeLinear / DequantizeLinear pair between the quantized ops it could not fuse. The flags are read from
``/proc/cpuinfo`` (Linux); ``torch.backends.cpu.get_cpu_capability()`` gives the vector ISA PyTorch dispatches to.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "avx_vnni_int8")
AMX_FLAGS = ("amx_int8", "amx_tile")
RUNTIMES = {"onnx": "ONNX Runtime (QDQ)", "openvino": "OpenVINO (NNCF)"}
NO_GAIN = 0.95
"""An INT8/fp32 latency ratio above this is no gain (within 5 %, about the spread of repeated medians here); above
its inverse, INT8 is slower."""


def cpu_info(cpuinfo: str | None = None) -> dict:
    """``{"name", "cores", "vnni", "amx", "flags", "isa"}`` of this CPU; ``vnni``/``amx``: the flags present
    (empty: none), None where ``/proc/cpuinfo`` cannot be read (not Linux). ``cpuinfo``: its text, for tests."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = None
    name, flags = platform.processor() or "unknown CPU", None
    for line in (cpuinfo or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and name == (platform.processor() or "unknown CPU"):
            name = value.strip()
        if key.strip() == "flags" and flags is None:
            flags = set(value.split())
    try:
        import torch

        isa = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001  an old torch without it
        isa = None
    return {"name": name, "cores": os.cpu_count(), "isa": isa,
            "vnni": None if flags is None else [f for f in VNNI_FLAGS if f in flags],
            "amx": None if flags is None else [f for f in AMX_FLAGS if f in flags]}


def _has(v) -> str:
    return "unknown" if v is None else (f"yes ({', '.join(v)})" if v else "no")


def cpu_line(info: dict | None = None) -> str:
    """``Intel(R) Xeon(R) Processor, 2 cores, VNNI yes (avx512_vnni, avx_vnni), AMX yes (amx_int8, amx_tile)``."""
    c = cpu_info() if info is None else info
    isa = f", PyTorch ISA {c['isa']}" if c.get("isa") else ""
    return f"{c['name']}, {c['cores']} cores, VNNI {_has(c['vnni'])}, AMX {_has(c['amx'])}{isa}"


def slower_note(fmt: str, ratio: float, info: dict | None = None, others: dict | None = None) -> str:
    """A sentence for an INT8 export that ran no faster than fp32 (``ratio`` = INT8 / fp32 > ``NO_GAIN``; "SLOWER"
    above ``1 / NO_GAIN``), else ``""``: the CPU,
    its INT8 instructions, and the faster choice on it. ``others``: ``{format: INT8/fp32 ratio}`` measured for the
    other runtimes on the same machine; the fastest one below 1 is named with its figure, else (none measured) the
    other runtime is pointed to, and fp32 is always the fallback."""
    if not ratio > NO_GAIN:
        return ""
    c = cpu_info() if info is None else info
    how = f"SLOWER than fp32 in {RUNTIMES[fmt]} on this CPU" if ratio > 1 / NO_GAIN else \
        f"no faster than fp32 in {RUNTIMES[fmt]} on this CPU (within {1 - NO_GAIN:.0%})"
    why = ("it has neither VNNI nor AMX, so 8-bit products are emulated with wider instructions"
           if c["vnni"] == [] and c["amx"] == [] else
           "it has 8-bit instructions, yet the runtime's quantize/dequantize steps between the ops it fused cost more "
           "than its 8-bit kernels saved at this size" if fmt == "onnx" else
           "it has 8-bit instructions, yet the runtime's 8-bit kernels saved less than they cost at this size")
    faster = {k: v for k, v in (others or {}).items() if k != fmt and v <= NO_GAIN}
    if faster:
        k = min(faster, key=faster.get)
        point = f"{RUNTIMES[k]} INT8 ran ×{faster[k]:.2f} its fp32 time on this CPU: deploy format={k} quantize=8"
    elif others:
        point = f"no INT8 runtime measured here beats its fp32: deploy fp32 (format={fmt})"
    else:
        other = "openvino" if fmt == "onnx" else "onnx"
        point = (f"try {RUNTIMES[other]} (format={other} quantize=8: its report measures its own ratio), or deploy "
                 f"fp32 (format={fmt})")
    return (f"INT8 is {how} (×{ratio:.2f}): {c['name']}, VNNI "
            f"{_has(c['vnni'])}, AMX {_has(c['amx'])}; {why}. {point[0].upper()}{point[1:]}.")
