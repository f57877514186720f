"""The attention health of trained checkpoints, one table: each block's entropy, knock-out, mean ablation and flags.

Measured as the health callback measures after an epoch (``attn_yolo.health.measure``, the flags of
``attn_yolo.health.flags``) on the first 8 validation images of a named data setting (``attn_yolo.synthetic``),
letterboxed to 128 px. ``mean_ablation`` is the largest change of a class probability at the anchors that detect
(> 0.25), averaged, with the block's gates held at their mean over those images: the figure that tells a block that
reads its input from a fixed rescale, where entropy cannot (BENCHMARKS.md, section 12.1).

    python scripts/health_of.py synthetic-key runs/ablate/known-answer/runs/cbam-seed0/weights/best.pt
    python scripts/health_of.py synthetic-shapes a/best.pt b/best.pt
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    import attn_yolo  # noqa: F401  the blocks registered before a checkpoint loads
    from attn_yolo.checkpoint import load_model
    from attn_yolo.health import flags, measure
    from attn_yolo.health.callback import load_images
    from attn_yolo.synthetic import default_data_yaml

    setting, weights = argv[0], argv[1:]
    images = sorted((Path(default_data_yaml(setting)).parent / "images" / "val").iterdir())[:8]
    x = load_images(images, 128, "cpu")
    print("| checkpoint | block | entropy | knock-out | mean ablation | flags |\n|---|---|---|---|---|---|")
    for w in weights:
        model = load_model(w).float().eval()
        for name, row in measure(model, x).items():
            print(f"| `{w}` | {name} | {row['entropy']:.4f} | {row['knockout']:.4f} | {row['mean_ablation']:.4f} | "
                  f"{', '.join(flags(row)) or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
