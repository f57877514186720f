"""Attention health during training: per-epoch gate statistics, entropies, |γ| and knock-out effect of every block.

    from ultralytics import YOLO
    from attn_yolo.health import attach

    model = YOLO("models/yolo11n-cbam.yaml")
    model.add_callback("on_pretrain_routine_start", attach)  # on by default in `attn-yolo train` and `attn-yolo ablate`
    model.train(data="data/synthetic-shapes.yaml", epochs=2, imgsz=128)  # → gates.csv, gates.png in the run folder

``measure`` (what is measured), ``flags`` (the thresholds), ``gatescsv`` (the file), ``callback`` (when, and the
NaN/inf guard), ``report`` (the printed table, gates.png, the ablation summary's section).
"""

from attn_yolo.health.callback import PNG_NAME, HealthMonitor, NonFiniteAttentionError, attach, default_on
from attn_yolo.health.flags import FLAGS, flags
from attn_yolo.health.gatescsv import CSV_NAME, read_csv
from attn_yolo.health.measure import measure
from attn_yolo.health.report import console_table, health_section, plot_gates

__all__ = ["CSV_NAME", "FLAGS", "PNG_NAME", "HealthMonitor", "NonFiniteAttentionError", "attach", "console_table",
           "default_on", "flags", "health_section", "measure", "plot_gates", "read_csv"]
