"""Insert attention blocks into a detect YAML, as ``attn-yolo insert``: ``python scripts/insert.py base=yolo11n.yaml``.

Thin wrapper around ``attn_yolo.insertion.main``; ``python scripts/insert.py help`` lists the keys.
"""

import sys

from attn_yolo.args import UsageError
from attn_yolo.insertion import main

if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
