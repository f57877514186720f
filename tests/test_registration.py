"""``register()`` next to a same-named Ultralytics global keeps it and puts it back; ``unregister()`` undoes everything
``register()`` did: names, wrappers, callbacks, torch's weights-only allow-list."""

from __future__ import annotations

import pytest
import torch
from ultralytics.engine import model as engine_model
from ultralytics.nn import tasks
from ultralytics.utils.callbacks import base

import attn_yolo
from attn_yolo import ultralytics_api as api
from attn_yolo.registry import BLOCKS, SAFE_GLOBALS, canonical, register, unregister

ROWS = {"nc": 2, "backbone": [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "SE", [4]]], "head": [[[-1], 1, "Detect", ["nc"]]]}


def state() -> dict:
    """What register() may change, by identity."""
    return {
        "names": {k: id(v) for k, v in vars(tasks).items()},
        "parse_model": tasks.parse_model,
        "init": vars(tasks)["_initialize_yolo_model"],
        "guess": engine_model.guess_model_task,
        "callbacks": {k: list(v) for k, v in base.default_callbacks.items()},
        "safe": set(torch.serialization.get_safe_globals()),  # an allow-list: order is no part of it
    }


@pytest.fixture
def unregistered():
    """Start unregistered; registered again afterwards (every other test expects ``import attn_yolo``'s state)."""
    unregister()
    try:
        yield
    finally:
        register()


def test_unregister_undoes_everything_register_did(unregistered):
    before = state()
    assert not set(BLOCKS) & set(vars(tasks))
    assert not set(SAFE_GLOBALS) & set(before["safe"])
    register()
    during = state()
    assert all(vars(tasks)[k] is v for k, v in BLOCKS.items())
    assert during["parse_model"] is not before["parse_model"] and during["init"] is not before["init"]
    assert during["guess"] is not before["guess"]
    assert set(SAFE_GLOBALS) <= set(during["safe"])
    assert during["callbacks"] != before["callbacks"]
    register()  # idempotent
    assert state() == during
    unregister()
    assert state() == before


def test_register_keeps_a_planted_ultralytics_global_and_unregister_restores_it(unregistered, monkeypatch):
    """An Ultralytics global named like a block (``tasks.SE``) is set aside while registered, still seen as
    Ultralytics' own, and back after ``unregister()``."""
    planted = type("SE", (torch.nn.Identity,), {})  # a same-named class of another origin
    monkeypatch.setattr(tasks, "SE", planted, raising=False)
    warnings = []
    from ultralytics.utils import LOGGER

    monkeypatch.setattr(LOGGER, "warning", lambda msg, *a, **k: warnings.append(msg))
    register()
    assert tasks.SE is BLOCKS["SE"]
    assert api.ultralytics_globals()["SE"] is planted  # still Ultralytics' own name
    assert canonical("SE") == "SE"
    assert any("ultralytics.nn.tasks defines SE" in w for w in warnings), warnings
    m = tasks.DetectionModel(ROWS, verbose=False)
    assert type(m.model[1]) is BLOCKS["SE"]
    unregister()
    assert tasks.SE is planted
    assert all(k not in vars(tasks) for k in BLOCKS if k != "SE")


def test_unregister_keeps_safe_globals_added_by_others(unregistered):
    class Other:
        pass

    register()
    torch.serialization.add_safe_globals([Other])
    unregister()
    safe = torch.serialization.get_safe_globals()
    assert Other in safe and not set(SAFE_GLOBALS) & set(safe)
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals([g for g in safe if g is not Other])


def test_a_safe_global_allowed_before_register_stays_after_unregister(unregistered):
    se = BLOCKS["SE"]
    torch.serialization.add_safe_globals([se])
    try:
        register()
        unregister()
        assert se in torch.serialization.get_safe_globals()
    finally:
        keep = [g for g in torch.serialization.get_safe_globals() if g is not se]
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(keep)


def test_import_registers():
    assert attn_yolo.MODULES["SE"] is vars(tasks)["SE"]
    assert api.is_patched(tasks, "parse_model")
