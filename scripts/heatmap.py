#!/usr/bin/env python
"""Attention heatmaps; same as ``attn-yolo heatmap key=value ...`` (see ``attn_yolo.heatmap``).

    python scripts/heatmap.py model=runs/detect/train/weights/best.pt source=path/to/images imgsz=640
"""

import sys

from attn_yolo_console import main

if __name__ == "__main__":
    sys.exit(main(["heatmap", *sys.argv[1:]]))
