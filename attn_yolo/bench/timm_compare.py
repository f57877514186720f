"""Section 3: our SE, ECA and CBAM against ``timm.layers`` carrying the same weights: faithfulness and latency."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.bench.common import Section, fmt, interleaved_times, median_ms, paired_ratio
from attn_yolo.markdown import table
from attn_yolo.nn import CBAM, ECA, SE

TIMM_NOISE = 1.05  # "ours no slower than timm": ratio <= this (identical op sequences; 5 % = interleaved-median noise)
TIMM_SHAPES = {False: ((1, 64, 80, 80), (16, 256, 40, 40)), True: ((1, 64, 20, 20), (2, 256, 10, 10))}  # by quick


def timm_twin(block: nn.Module) -> nn.Module:
    """The ``timm.layers`` equivalent of our ``SE``, ``ECA`` or ``CBAM`` (no residual gate), carrying its weights.

    * ``SE`` → ``SEModule(C, rd_channels=hidden)`` (1×1 convs with bias, ReLU, sigmoid): same definition.
    * ``ECA`` → ``EcaModule(kernel_size=k)`` (timm's adaptive ``k`` is clamped to ``>= 3``; passing ``k`` avoids it).
    * ``CBAM`` → ``CbamModule(C, rd_channels=hidden, spatial_kernel_size=k, mlp_bias=True)``: same order (channel,
      then spatial on the channel-refined map), sigmoid gates, avg+max pooling in both. timm's spatial conv is a
      bias-free conv followed by BatchNorm; the BN is set to the identity plus our conv's bias (running mean 0,
      running var 1, eps 0, weight 1, bias = our bias), exact in eval mode.

    Raises:
        TypeError: for another block, or one built with ``init_values`` (timm has no residual gate).
    """
    from timm.layers import EcaModule, SEModule
    from timm.layers.cbam import CbamModule  # not re-exported by timm.layers

    if getattr(block, "scale", None) is not None:
        raise TypeError("timm_twin: the block has a residual gate (init_values); timm's modules have none")
    if isinstance(block, SE):
        twin = SEModule(block.c1, rd_channels=block.hidden)
        pairs = [(twin.fc1, block.fc1), (twin.fc2, block.fc2)]
    elif isinstance(block, ECA):
        twin = EcaModule(kernel_size=block.k)
        pairs = [(twin.conv, block.conv)]
    elif isinstance(block, CBAM):
        twin = CbamModule(block.c1, rd_channels=block.channel.hidden, spatial_kernel_size=block.k, mlp_bias=True)
        pairs = [(twin.channel.fc1, block.channel.mlp[0]), (twin.channel.fc2, block.channel.mlp[2])]
        conv, bn = twin.spatial.conv.conv, twin.spatial.conv.bn
        with torch.no_grad():
            conv.weight.copy_(block.spatial.conv.weight)
            bn.running_mean.zero_(), bn.running_var.fill_(1.0), bn.weight.fill_(1.0)
            bn.bias.copy_(block.spatial.conv.bias)
        bn.eps = 0.0
    else:
        raise TypeError(f"timm_twin: no timm equivalent for {type(block).__name__} (SE, ECA, CBAM)")
    with torch.no_grad():
        for dst, src in pairs:
            dst.weight.copy_(src.weight)
            if src.bias is not None:
                dst.bias.copy_(src.bias)
    return twin.eval()


def timm_section(cfg: dict) -> Section:
    """Section 3: faithfulness (max |Δ|) and latency ratio of SE/ECA/CBAM vs timm.layers, interleaved."""

    s = Section("3. Reference implementations: ours vs timm.layers")
    try:
        import timm
    except ImportError as e:
        s.body.append(f"Skipped: {e} (pip install 'attn-yolo[bench]').")
        return s
    rows, worst = [], {}
    for shape in TIMM_SHAPES[cfg["quick"]]:
        torch.manual_seed(0)
        x = torch.randn(shape)
        for name, cls in (("SE", SE), ("ECA", ECA), ("CBAM", CBAM)):
            ours = cls(shape[1]).eval()
            for p in ours.parameters():  # non-trivial weights everywhere (biases too)
                nn.init.normal_(p, std=0.1)
            twin = timm_twin(ours)
            with torch.no_grad():
                diff = (ours(x) - twin(x)).abs().max().item()

            def call(m, x=x):
                def run():
                    with torch.no_grad():
                        m(x)

                return run

            t = interleaved_times({"ours": call(ours), "timm": call(twin)}, max(5, cfg["repeats"] * 5))
            r = paired_ratio(t["ours"], t["timm"])
            worst[name] = max(worst.get(name, (0, 0)), (r, diff))
            rows.append([name, "×".join(map(str, shape)), f"{diff:.1e}", "yes" if diff <= 1e-6 else "NO",
                         fmt(median_ms(t["ours"])), fmt(median_ms(t["timm"])), fmt(r)])
    for name, (r, diff) in worst.items():
        ok = "met" if diff <= 1e-6 else "missed"
        s.targets.append((f"{name} faithful to timm (max abs Δ ≤ 1e-6)", f"{diff:.1e}", ok, ""))
        s.targets.append((f"{name} no slower than timm (ours/timm ≤ {TIMM_NOISE})", f"{fmt(r)} (worst shape)",
                          "met" if r <= TIMM_NOISE else "missed", "" if r <= TIMM_NOISE else
                          "same op sequence: a gap this size means noise or a different memory layout; rerun quiet"))
    s.body += [
        f"timm {timm.__version__}. Same weights copied into timm's modules (`attn_yolo.bench.timm_compare.timm_twin`), "
        "eval mode, "
        f"fp32; inputs randn. Latency: interleaved, median of {max(5, cfg['repeats'] * 5)} runs each; ratio = median "
        "of per-round ours/timm.",
        "",
        table(["block", "input", "max abs Δ", "≤ 1e-6", "ours ms", "timm ms", "ours / timm"], rows),
        "",
        "Definitions: SE = `SEModule(C, rd_channels=ours.hidden)` (identical). ECA = `EcaModule(kernel_size=ours.k)` "
        "(identical; timm clamps its adaptive k to ≥ 3). CBAM = `CbamModule(C, rd_channels=ours.hidden, "
        "spatial_kernel_size=7, mlp_bias=True)`: same channel-then-spatial order, sigmoid gates, avg+max pooling; "
        "timm's default has no MLP bias (ours has) and its spatial conv is conv+BatchNorm without conv bias — the BN "
        "is set to identity + our conv bias, so it costs timm one extra elementwise pass.",
    ]
    return s
