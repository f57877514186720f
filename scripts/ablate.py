#!/usr/bin/env python
"""Thin wrapper: ``python scripts/ablate.py [config.yaml] [key=value ...]`` is ``attn-yolo ablate ...``.

    python scripts/ablate.py                                        # the quick synthetic default
    python scripts/ablate.py configs/ablation/coco128-quick.yaml epochs=1
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without `pip install`

from attn_yolo_console import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["ablate", *sys.argv[1:]]))
