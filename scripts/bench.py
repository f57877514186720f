#!/usr/bin/env python
"""Run the attn-yolo benchmarks; the same as ``attn-yolo bench key=value ...`` (``help`` lists the keys).

    python scripts/bench.py                  # full run (about 10 min on 2 CPU cores), writes BENCHMARKS.md
    python scripts/bench.py quick=True       # smoke run of every code path
"""

import sys

from attn_yolo_console import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
