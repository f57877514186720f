"""Preparing a validated ablation for its runs: the dataset generated, every arm built and sized, the placebos added.

``validate`` is cheap and changes nothing; this is the heavy part that follows it in the run (``run_ablation`` calls
``prepare`` before it takes the lock on ``out``, so its problems still come before any training, as a
``ConfigError`` naming the key, exit code 2 on the command line):

- ``data: synthetic``: the synthetic-shapes dataset is generated (once; later runs reuse the cache).
- every arm is built as the trainer will build it, at the config's imgsz and with the dataset's classes: an insert
  spec through ``insert_dict`` (so that a hyperparameter that does not fit its layer names the inserted row), then
  ``DetectionModel``; its parameters and GFLOPs (Ultralytics ``get_num_params``, ``get_flops``) go into the
  ``Variant`` and each run's record.
- every arm's new blocks (``attn_yolo.ablate.statistics.treatment.new_block_paths``): the blocks it adds to the baseline,
  which the training gives their own learning rate (``new_blocks``) and the attention check holds at their mean.
- ``placebo``: each placebo arm's ``Placebo`` blocks are sized to the blocks of the variant it controls, which needs
  that variant built (``design.placebo_spec``); the arms join ``variants`` before the reference.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from attn_yolo.ablate.config import design
from attn_yolo.ablate.config.ablation import SYNTHETIC, Ablation, ConfigError, Variant, first_line
from attn_yolo.ablate.config.variants import check_variants

_SIZES: dict[tuple, tuple[int, float, list[str] | None]] = {}  # (definition, nc, imgsz, baseline) → what build sets


def build(v: Variant, nc: int, imgsz: int, base_dict: dict | None = None) -> None:
    """Build variant ``v`` at ``imgsz`` with ``nc`` classes, run one forward pass, and set ``v.params``, ``v.gflops``
    and ``v.new_blocks`` (the blocks it adds to ``base_dict``, the baseline's model dict: ``treatment.new_block_paths``;
    None without ``base_dict``).

    Raises:
        Exception: whatever the build raises (``InsertionError`` for an insert spec naming the inserted row,
            ``AttnBuildError``, ...).
    """
    import torch
    from ultralytics.nn.tasks import DetectionModel
    from ultralytics.utils.torch_utils import get_flops, get_num_params

    from attn_yolo.ablate.statistics.treatment import new_block_paths
    from attn_yolo.insertion import insert_dict

    size_key = (v.definition, nc, imgsz, design.fingerprint(base_dict))
    if size_key not in _SIZES:  # built and measured before in this process: same answer
        if v.spec is not None:
            insert_dict(**v.spec)  # builds at 64 px: an error names the inserted block and the base layer it follows
        m = DetectionModel(copy.deepcopy(v.model_dict) if v.model_dict else v.model, nc=nc, verbose=False).eval()
        with torch.no_grad():
            m(torch.zeros(1, 3, imgsz, imgsz))  # runs at the config's imgsz too
        paths = None if base_dict is None else new_block_paths(base_dict, design.arm_dict(v), m)
        _SIZES[size_key] = get_num_params(m), get_flops(m, imgsz), paths
    v.params, v.gflops, v.new_blocks = _SIZES[size_key]


def build_all(variants: list[Variant], nc: int, imgsz: int, base_dict: dict | None = None) -> list[str]:
    """Build each variant; one problem per variant that does not build, named by its config key."""
    problems = []
    for v in variants:
        try:
            build(v, nc, imgsz, base_dict)
        except Exception as e:  # noqa: BLE001  any build failure is a config problem of that variant
            problems.append(f"{v.key}{'' if v.spec is not None else '.model'}: does not build: {first_line(e)}")
    return problems


def _placebo_arms(ab: Ablation, by_name: dict[str, Variant]) -> tuple[list[Variant], list[str]]:
    """The placebo arms of ``ab.placebos``, checked (not yet built); with problems."""
    base = by_name[ab.baseline]
    arms, problems = [], []
    for arm, target in ab.placebos.items():
        try:
            spec = design.placebo_spec(target, design.arm_dict(by_name[target]), design.arm_dict(base), base.model,
                                       ab.nc)
        except ValueError as e:
            problems.append(f"placebo: {first_line(e)}")
            continue
        got, _, p = check_variants([spec], Path.cwd(), ab.start.model_dict if ab.start else None, "start")
        problems += [f"placebo: {q}" for q in p]
        arms += [dataclasses.replace(v, key=f"placebo ({arm})") for v in got]
    return arms, problems


def prepare(ab: Ablation) -> Ablation:
    """Make a validated ablation ready to run (see the module docstring); does nothing when it already is.

    Changes ``ab`` in place and returns it: ``ab.data`` generated where ``data: synthetic``, every variant's
    ``params`` and ``gflops`` set, the placebo arms added to ``ab.variants``, ``ab.prepared`` set.

    Raises:
        ConfigError: every arm that does not build, each named by its config key (``variants[2] (cbam): does not
            build: ...``), before any training.
    """
    if ab.prepared:
        return ab
    name, _, root = ab.data_id.partition(":")
    if name.startswith(SYNTHETIC) and root == Path(ab.data).parent.name:
        from attn_yolo.ablate.runs.console import phase_line
        from attn_yolo.synthetic import default_data_yaml, default_root, setting

        if not (default_root(name) / "data.yaml").exists():  # generated once, then cached: said only when generated
            print(phase_line("dataset", f"generating the {setting(name)} dataset (once, then cached) ..."), flush=True)
        ab.data = ab.config["data"] = str(default_data_yaml(name))
    by_name = {v.name: v for v in ab.variants}
    base_dict = design.arm_dict(by_name[ab.baseline])
    problems = build_all(ab.variants, ab.nc, ab.imgsz, base_dict)
    if not problems and ab.placebos:
        arms, problems = _placebo_arms(ab, by_name)
        problems += build_all(arms, ab.nc, ab.imgsz, base_dict)
        if not problems:
            at = next((k for k, v in enumerate(ab.variants) if v.name == ab.reference), len(ab.variants))
            ab.variants[at:at] = arms
    if problems:
        raise ConfigError(ab.source, problems)
    ab.prepared = True
    return ab
