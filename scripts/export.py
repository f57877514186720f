#!/usr/bin/env python
"""Export a model to ONNX and verify it against PyTorch; same as ``attn-yolo export key=value ...``.

    python scripts/export.py model=best.pt imgsz=640 dynamic=True
"""

import sys

from attn_yolo_console import main

if __name__ == "__main__":
    sys.exit(main(["export", *sys.argv[1:]]))
