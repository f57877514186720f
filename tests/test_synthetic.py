"""Fast tests for the embedded synthetic-shapes dataset (attn_yolo.synthetic, data/synthetic-shapes.yaml)."""

import functools
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from attn_yolo import synthetic

REPO = Path(__file__).resolve().parents[1]
SMALL = dict(n_train=6, n_val=3, imgsz=96)  # a few images keep every test well under a second or two


def _files(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes for every image and label file under root."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.suffix in {".jpg", ".txt"}}


def test_generate_is_deterministic(tmp_path):
    a = _files(synthetic.generate(tmp_path / "a", seed=3, **SMALL).parent)
    b = _files(synthetic.generate(tmp_path / "b", seed=3, **SMALL).parent)
    c = _files(synthetic.generate(tmp_path / "c", seed=4, **SMALL).parent)
    assert a == b
    assert a.keys() == c.keys() and a != c


def test_bigger_split_extends_smaller(tmp_path):
    small = _files(synthetic.generate(tmp_path / "s", n_train=2, n_val=1, imgsz=96).parent)
    big = _files(synthetic.generate(tmp_path / "b", n_train=4, n_val=2, imgsz=96).parent)
    assert all(big[k] == v for k, v in small.items())


def test_layout_counts_and_labels(tmp_path):
    data_yaml = synthetic.generate(tmp_path / "ds", **SMALL)
    root = data_yaml.parent
    meta = yaml.safe_load(data_yaml.read_text())
    assert meta["names"] == dict(enumerate(synthetic.CLASS_NAMES))
    assert Path(meta["path"]) == root
    n_boxes = 0
    for split, n in (("train", SMALL["n_train"]), ("val", SMALL["n_val"])):
        images = sorted((root / "images" / split).glob("*.jpg"))
        labels = sorted((root / "labels" / split).glob("*.txt"))
        assert len(images) == len(labels) == n
        assert [p.stem for p in images] == [p.stem for p in labels]
        for p in labels:
            lab = np.loadtxt(p, ndmin=2)
            assert lab.shape[0] >= 1 and lab.shape[1] == 5
            cls, xy, wh = lab[:, 0], lab[:, 1:3], lab[:, 3:5]
            assert np.all(cls == cls.astype(int)) and np.all((cls >= 0) & (cls < len(synthetic.CLASS_NAMES)))
            assert np.all((wh > 0) & (wh <= 1)) and np.all((xy >= 0) & (xy <= 1))
            assert np.all(xy - wh / 2 >= -1e-6) and np.all(xy + wh / 2 <= 1 + 1e-6)  # boxes clamped to the image
            assert np.all(wh * SMALL["imgsz"] >= 2)  # no degenerate boxes
            n_boxes += len(lab)
    assert n_boxes >= SMALL["n_train"] + SMALL["n_val"]


def test_render_shapes_and_sizes():
    img, lab = synthetic.render(np.random.default_rng(0), 128)
    assert img.shape == (128, 128, 3) and img.dtype == np.uint8
    assert lab.ndim == 2 and lab.shape[1] == 5


def test_existing_dataset_is_kept_and_foreign_folder_refused(tmp_path, capsys):
    data_yaml = synthetic.generate(tmp_path / "ds", **SMALL)
    err = capsys.readouterr().err  # where the data went, said when it is written
    assert f"wrote the synthetic-shapes dataset (6 train / 3 val images, 0 MiB) to {tmp_path / 'ds'};" in err
    assert "delete that folder to clear it" in err
    stamp = data_yaml.stat().st_mtime_ns
    assert synthetic.generate(tmp_path / "ds", **SMALL) == data_yaml
    assert data_yaml.stat().st_mtime_ns == stamp
    assert capsys.readouterr().err == ""  # reused: nothing written, nothing said
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("not a dataset")
    with pytest.raises(FileExistsError):
        synthetic.generate(tmp_path / "other", **SMALL)
    with pytest.raises(ValueError):
        synthetic.generate(tmp_path / "bad", n_train=0)


def test_default_data_yaml_idempotent_and_concurrent(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_YOLO_DATA", str(tmp_path / "cache"))
    for k, v in SMALL.items():
        monkeypatch.setattr(synthetic, k.upper(), v)
    out, errors = [], []

    def call():
        try:
            out.append(synthetic.default_data_yaml())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(out)) == 1
    path = out[0]
    assert path == synthetic.default_data_yaml()
    assert path.parent.parent == tmp_path / "cache"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [path.parent.name]  # temp folders cleaned up
    assert len(list((path.parent / "images" / "train").glob("*.jpg"))) == SMALL["n_train"]


def test_repo_yaml_resolves_through_ultralytics(tmp_path, monkeypatch):
    """data/synthetic-shapes.yaml generates its data via the `download:` script and passes check_det_dataset."""
    monkeypatch.setenv("YOLO_OFFLINE", "1")
    from ultralytics.data.utils import check_det_dataset

    cfg = yaml.safe_load((REPO / "data" / "synthetic-shapes.yaml").read_text())
    assert cfg["names"] == dict(enumerate(synthetic.CLASS_NAMES))
    root = tmp_path / "shapes"
    cfg["path"] = str(root)  # keep the test out of the real datasets_dir
    local = tmp_path / "synthetic-shapes.yaml"
    local.write_text(yaml.safe_dump(cfg, sort_keys=False))
    monkeypatch.setattr(synthetic, "generate", functools.partial(synthetic.generate, **SMALL))

    data = check_det_dataset(str(local))  # first use: runs the download script
    assert (root / "data.yaml").exists()
    assert data["nc"] == len(synthetic.CLASS_NAMES)
    assert Path(data["train"]) == root / "images" / "train"
    assert Path(data["val"]) == root / "images" / "val"
    assert len(list(Path(data["val"]).glob("*.jpg"))) == SMALL["n_val"]

    generated = check_det_dataset(str(root / "data.yaml"))  # the generated YAML resolves on its own too
    assert generated["val"] == data["val"] and generated["names"] == data["names"]


def test_quick_train_args_are_ultralytics_train_args():
    from ultralytics.cfg import DEFAULT_CFG_DICT

    assert set(synthetic.QUICK_TRAIN_ARGS) <= set(DEFAULT_CFG_DICT)
    assert synthetic.QUICK_TRAIN_ARGS["imgsz"] == synthetic.IMGSZ


def test_make_synthetic_script(tmp_path, capsys):
    import runpy

    main = runpy.run_path(str(REPO / "scripts" / "make_synthetic.py"))["main"]
    assert main([str(tmp_path / "ds"), "--n-train", "2", "--n-val", "1", "--imgsz", "64"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == tmp_path / "ds" / "data.yaml" and out.exists()


# ------------------------------------------------------------------------------- the known-answer settings
def _checker_found(img: np.ndarray, fraction: float = synthetic.KEY_SIDE) -> bool:
    """An independent detector of the key marker: a 4 x 4 black-and-white checkerboard of ``fraction`` of the image
    side, found by template matching."""
    import cv2

    side = round(fraction * img.shape[0])
    cells = (np.add.outer(np.arange(4), np.arange(4)) % 2 * 255).astype(np.uint8)
    tpl = cv2.resize(cells, (side, side), interpolation=cv2.INTER_NEAREST)
    score = cv2.matchTemplate(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), tpl, cv2.TM_CCOEFF_NORMED).max()
    return bool(score > 0.8)


@pytest.mark.parametrize("name", ["synthetic-key", "synthetic-key-small"])
def test_the_key_selects_the_targets_in_the_images_that_show_it_and_the_decoy_changes_none(name):
    """``synthetic-key`` and ``synthetic-key-decoy`` draw the same images; the key marker is in about half of them.
    Where a template match finds it, key's targets are decoy's circles and squares only; where it finds none, decoy's
    triangles and crosses only: the same boxes, the others left unlabelled. The same for the 8-px marker's pair."""
    kw = {k: v for k, v in synthetic.SETTINGS[name].items() if k != "key"}
    assert synthetic.SETTINGS[f"{name}-decoy"] == {**synthetic.SETTINGS[name], "key": "decoy"}
    side = kw.get("key_side", synthetic.KEY_SIDE)
    assert round(side * synthetic.IMGSZ) == (8 if name.endswith("small") else 14)
    shown = 0
    for i in range(40):
        a, la = synthetic.render(np.random.default_rng([0, 1, i]), key="select", **kw)
        b, lb = synthetic.render(np.random.default_rng([0, 1, i]), key="decoy", **kw)
        assert np.array_equal(a, b)
        found = _checker_found(a, side)
        assert not _checker_found(a, 0.11 if side < 0.1 else 0.0625) or found  # the other size is not what is drawn
        shown += found
        keep = np.isin(lb[:, 0], [0, 1]) == found
        assert np.array_equal(la, lb[keep]) and set(la[:, 0]) <= ({0, 1} if found else {2, 3})
    assert 12 <= shown <= 28  # half of 40, within the binomial's 99.9 % range


def test_settings_by_name(tmp_path, monkeypatch):
    """Each setting is its own cached dataset; ``synthetic`` is ``synthetic-shapes``; an unknown name is refused
    with the list."""
    monkeypatch.setenv("ATTN_YOLO_DATA", str(tmp_path))
    assert synthetic.default_root("synthetic") == synthetic.default_root()
    roots = {synthetic.default_root(n).name for n in synthetic.SETTINGS}
    assert len(roots) == len(synthetic.SETTINGS) and all(r.startswith(tuple(synthetic.SETTINGS)) for r in roots)
    with pytest.raises(ValueError, match="'synthetic-keys'; expected one of synthetic, synthetic-shapes, "
                                         "synthetic-key, synthetic-key-decoy"):
        synthetic.default_root("synthetic-keys")
    with pytest.raises(ValueError, match="key: 'other'"):
        synthetic.generate(tmp_path / "x", key="other", **SMALL)
