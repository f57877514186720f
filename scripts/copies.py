"""Write docs/copies.md: every block's popular copies (signatures, sources, defaults), generated from the code's tables.

    python scripts/copies.py            # writes docs/copies.md
    python scripts/copies.py --check    # exit 1 if docs/copies.md is not the generated text
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str]) -> int:
    from attn_yolo.copies import copies_markdown

    out, text = REPO / "docs" / "copies.md", copies_markdown()
    if "--check" in argv:
        same = out.is_file() and out.read_text() == text
        print(f"{out}: {'up to date' if same else 'stale: run python scripts/copies.py'}")
        return 0 if same else 1
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
