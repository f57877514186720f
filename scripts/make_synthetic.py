#!/usr/bin/env python
"""Write the attn-yolo synthetic-shapes detection dataset to a folder (thin CLI over attn_yolo.synthetic.generate).

Example:
    python scripts/make_synthetic.py /tmp/shapes --n-train 1000 --n-val 200 --imgsz 128 --seed 0
    python scripts/make_synthetic.py --default   # fill the default cache used by `attn-yolo ablate`
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from attn_yolo import synthetic  # noqa: E402


def main(argv=None) -> int:
    """Parse arguments, generate the dataset and print the path of its data.yaml.

    Args:
        argv: command-line arguments (default: sys.argv[1:]).

    Returns:
        Process exit status (0 on success).
    """
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", type=Path, help="output folder (omit with --default)")
    p.add_argument("--default", action="store_true", help="generate the default dataset into the cache folder")
    p.add_argument("--n-train", type=int, default=synthetic.N_TRAIN, help="training images")
    p.add_argument("--n-val", type=int, default=synthetic.N_VAL, help="validation images")
    p.add_argument("--imgsz", type=int, default=synthetic.IMGSZ, help="image side, pixels")
    p.add_argument("--seed", type=int, default=0, help="base random seed")
    p.add_argument("--clutter", type=float, default=synthetic.CLUTTER, help="clutter strength, 0 (plain) .. 1 (heavy)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset")
    a = p.parse_args(argv)
    if a.default == (a.root is not None):
        p.error("give exactly one of ROOT or --default")
    if a.default:
        print(synthetic.default_data_yaml())
    else:
        print(synthetic.generate(a.root, n_train=a.n_train, n_val=a.n_val, imgsz=a.imgsz, seed=a.seed,
                                 clutter=a.clutter, overwrite=a.overwrite))
    return 0


if __name__ == "__main__":
    sys.exit(main())
