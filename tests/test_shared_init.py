"""`start: init`: each seed's arms start from that seed's untrained initialisation of the baseline model, shared by
every arm of the seed (blocks inserted, weights carried by layer); written once per seed, the caller's RNG kept."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml
from conftest import write_config

from attn_yolo import ablate
from attn_yolo.ablate.config import design
from attn_yolo.ablate.runs.runner import plan
from attn_yolo.ablate.runs.start import summary_line, too_weak, write_inits
from attn_yolo.ablate.runs.train import build_arm
from attn_yolo.checkpoint import load_model


def _ablation(tiny_data, tmp_path):
    cfg = write_config(tmp_path, tiny_data, start="init", new_blocks={"gamma": 1.0}, seeds=[0, 1])
    raw, base, name, source = ablate.load_config(cfg)
    return ablate.validate(raw, base, name, source)


def _built(spec, folder: Path):
    """The YOLO the runner trains for ``spec``, at step 0 (``build_arm``, as a run builds it)."""
    model = spec.model
    if spec.model_dict is not None:
        folder.mkdir(parents=True, exist_ok=True)
        model = str(folder / spec.model)
        Path(model).write_text(yaml.safe_dump(spec.model_dict, sort_keys=False))
    return build_arm(spec, model, dict(spec.train)).model


def test_each_seed_has_its_own_initialisation_shared_by_its_arms(tiny_data, tmp_path):
    from ultralytics.nn.tasks import DetectionModel

    ab = _ablation(tiny_data, tmp_path)
    assert ab.start.kind == design.INIT and Path(ab.start.folder) == ab.out / "start-init"
    by = {(s.variant, s.seed): s for s in plan(ab, ab.data)}
    assert by[("baseline", 0)].start == by[("cbam", 0)].start != by[("baseline", 1)].start
    assert by[("cbam", 0)].gamma == 1.0

    rng = torch.get_rng_state()
    assert len(write_inits(ab, [0, 1, 0])) == 2
    assert torch.equal(torch.get_rng_state(), rng)  # the caller's draws are not moved
    assert write_inits(ab, [0, 1]) == []  # written once, reused

    for seed in (0, 1):  # independently: the baseline model built right after torch.manual_seed(seed), in FP16
        torch.manual_seed(seed)
        ref = DetectionModel("yolo11n.yaml", nc=ab.nc, verbose=False).half().float().state_dict()
        got = load_model(by[("baseline", seed)].start, "start", suffixes=(".pt",)).float().state_dict()
        assert ref.keys() == got.keys() and all(torch.equal(ref[k], got[k]) for k in ref), seed
    w0 = load_model(by[("baseline", 0)].start, "start", suffixes=(".pt",)).model[0].conv.weight
    w1 = load_model(by[("baseline", 1)].start, "start", suffixes=(".pt",)).model[0].conv.weight
    assert not torch.equal(w0, w1)  # another seed, another initialisation

    base = _built(by[("baseline", 0)], tmp_path / "b")
    cbam = _built(by[("cbam", 0)], tmp_path / "c")
    assert torch.equal(base.model[0].conv.weight.float(), w0.float())
    assert torch.equal(cbam.model[0].conv.weight.float(), w0.float())  # carried past the inserted blocks
    assert torch.equal(cbam.model[-1].cv2[0][0].conv.weight.float(), base.model[-1].cv2[0][0].conv.weight.float())
    assert any(type(m).__name__ == "CBAM" for m in cbam.model)
    assert too_weak(ab) is None  # an untrained start is not a trained start below the floor
    assert "shared initialisation" in summary_line(ab) and "γ = 1" in summary_line(ab)


def test_init_needs_a_baseline_model_yaml(tmp_path):
    start, problems = design.check_start("init", "start", tmp_path, 4, {}, False, False,
                                         [{"name": "b", "model": "best.pt"}], "data")
    assert start is None and problems == ["start: init; needs the baseline's `model` to be a model YAML, not 'best.pt'"]
    start, problems = design.check_start("nit", "start", tmp_path, 4, {}, False, False,
                                         [{"name": "b", "model": "yolo11n.yaml"}], "data")
    assert start is None and "or init (each seed's untrained initialisation" in " ".join(problems)


def test_a_yardstick_of_another_scale_starts_from_its_own_initialisation_per_seed(tiny_data, tmp_path):
    """``start: init`` with ``reference: {model: yolo11s.yaml}``: the reference's runs carry its own untrained yolo11s
    of their seed (out/start-reference/), written with the shared ones. They were not written, so every reference run
    of the main job with the yardstick failed with "no such file" after 3 s."""
    from ultralytics.nn.tasks import DetectionModel

    cfg = write_config(tmp_path, tiny_data, start="init", new_blocks={"gamma": 1.0}, seeds=[0, 1],
                       reference={"model": "yolo11s.yaml"})
    ab = ablate.validate(*ablate.load_config(cfg))
    by = {(s.variant, s.seed): s for s in plan(ab, ab.data)}
    ref = by[("reference", 1)].start
    assert Path(ref).parent.name == "start-reference" and ref != by[("baseline", 1)].start
    assert len(write_inits(ab, [0, 1])) == 4 and Path(ref).is_file()
    torch.manual_seed(1)
    want = DetectionModel("yolo11s.yaml", nc=ab.nc, verbose=False).half().float().state_dict()
    got = load_model(ref, "start", suffixes=(".pt",)).float().state_dict()
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
