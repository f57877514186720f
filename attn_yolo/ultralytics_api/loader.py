"""The probe of Ultralytics' training dataloader: whether it seeds its data order from ``seed``.

Relies on ``ultralytics.data.build.build_dataloader`` and ``ultralytics.utils.torch_utils.init_seeds`` as
``BaseTrainer`` calls them (``init_seeds(seed + 1)`` before the loader is built); ``tests/test_ultralytics_contract.py``
checks the installed Ultralytics against it. Imports nothing of attn_yolo.
"""

from __future__ import annotations


def loader_seed_problem() -> str | None:
    """Whether the installed Ultralytics seeds its training dataloader from ``seed``: the order of a shuffled
    loader built after the trainer's ``init_seeds(seed + 1)`` must differ between seeds 0 and 1 and repeat for one
    seed (earlier 8.4.x builds used a constant: every seed shared one data order, ultralytics #6820). The
    augmentation draws from the generators ``init_seeds`` seeds. Returns the problem, or None; RNG states are kept.
    """
    import random

    import numpy as np
    import torch
    import ultralytics
    from ultralytics.data.build import build_dataloader
    from ultralytics.utils.torch_utils import init_seeds

    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        orders = []
        for seed in (0, 1, 0):
            init_seeds(seed + 1)  # as BaseTrainer.__init__ does
            loader = build_dataloader(list(range(32)), batch=32, workers=0, shuffle=True, rank=-1, device="cpu")
            orders.append(next(iter(loader)).tolist())
    except Exception as e:  # noqa: BLE001  an Ultralytics whose loader cannot be probed: say so, do not guess
        return f"could not check that Ultralytics {ultralytics.__version__} seeds its dataloader from `seed`: {e}"
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
    if orders[0] != orders[2]:
        return f"Ultralytics {ultralytics.__version__} gives one seed two data orders: runs are not reproducible"
    if orders[0] == orders[1]:
        return (f"Ultralytics {ultralytics.__version__} ignores `seed` in its dataloader (every seed gets one data "
                "order, ultralytics #6820): seeds are no independent replicates; use ultralytics >= 8.4.190")
    return None
