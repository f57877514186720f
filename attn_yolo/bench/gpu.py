"""Section 5: which SDPA backends run on the CUDA device, their time and peak memory under fp16/bf16 autocast."""

from __future__ import annotations

import contextlib

import torch

from attn_yolo.bench.attention import PASSES, attention_call, attention_inputs
from attn_yolo.bench.common import MIB, Section, fmt, median_ms, profile_kernel, short_error, timed
from attn_yolo.markdown import table


def sdpa_backend_rows(device: str, tokens, dtypes=("float16", "bfloat16"), repeats: int = 10, passes=PASSES):
    """Time and memory of MHSA(128, 4) with each SDPA backend forced, plus explicit/Ultralytics, under autocast.

    Runs on any device (the unit test uses ``"cpu"``); peak memory is ``torch.cuda.max_memory_allocated`` over the
    allocation before the pass, on CUDA only. A backend that cannot run the case reports PyTorch's reason.

    Returns:
        list[list]: rows ``[dtype, N, implementation, pass, kernel, ms | error, peak MiB]``.
    """
    import warnings

    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"flash": "FLASH_ATTENTION", "memory-efficient": "EFFICIENT_ATTENTION", "cuDNN": "CUDNN_ATTENTION",
                "math": "MATH"}
    cuda = device.startswith("cuda")
    rows = []
    for dt in dtypes:
        for n in tokens:
            impls = [(f"MHSA fused, forced {b}", "mhsa", getattr(SDPBackend, e, None)) for b, e in backends.items()]
            impls += [("MHSA explicit", "mhsa_explicit", None), ("Ultralytics Attention", "ultra", None)]
            for label, kind, backend in impls:
                m, (x,) = attention_inputs(kind, n)
                m, x = m.to(device), x.to(device)

                @contextlib.contextmanager
                def ctx(backend=backend, dt=dt):
                    with torch.autocast(device.split(":")[0], dtype=getattr(torch, dt)):
                        with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
                            yield

                for p in passes:
                    fn = attention_call(kind, m, (x,), p, ctx)
                    kernel, ms, mib = None, None, None
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        try:
                            if kind == "mhsa" and backend is None:
                                raise RuntimeError(f"torch {torch.__version__} has no SDPBackend for {label}")
                            if cuda:
                                torch.cuda.synchronize()
                                torch.cuda.reset_peak_memory_stats()
                                base = torch.cuda.memory_allocated()
                            kernel = profile_kernel(fn)
                            ms = fmt(median_ms([timed(fn) for _ in range(repeats)]))
                            if cuda:
                                mib = fmt((torch.cuda.max_memory_allocated() - base) / MIB)
                        except (RuntimeError, MemoryError) as e:
                            why = [str(w.message).splitlines()[0] for w in caught
                                   if any(k in str(w.message).lower() for k in ("sdp", "attention", "kernel"))]
                            err = short_error(e, None)
                            if "No viable backend" in err:
                                why = f": {' '.join(why)[:200]}" if why else " (no kernel for this input)"
                                ms = "unavailable" + why
                            else:
                                ms = err
                            ms = ms.replace("|", "/")
                            if cuda:
                                torch.cuda.empty_cache()
                    rows.append([dt, n, label, {"fwd": "forward", "fwdbwd": "fwd+bwd"}[p], kernel, ms, mib])
                del m, x
                if cuda:
                    torch.cuda.empty_cache()
    return rows


def gpu_section(cfg: dict) -> Section:
    """Section 5: SDPA backends on the CUDA device, or a note that there is none."""
    s = Section("5. GPU: SDPA backends under fp16/bf16 autocast")
    if not torch.cuda.is_available():
        s.body.append("Skipped: no CUDA device on this machine. On a GPU machine this section forces each SDPA backend "
                      "(`torch.nn.attention.sdpa_kernel`) on MHSA(128, heads=4) and reports kernel, time and "
                      "`torch.cuda.max_memory_allocated` under fp16/bf16 autocast at the token counts of section 1.")
        return s
    rows = sdpa_backend_rows("cuda", cfg["tokens"], repeats=cfg["repeats"])
    s.body += [
        f"{torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}, autocast; median of {cfg['repeats']} runs; "
        "peak = `torch.cuda.max_memory_allocated` minus the allocation before the pass.",
        "",
        table(["dtype", "N", "implementation", "pass", "kernel", "median ms", "peak MiB"], rows),
    ]
    return s
