"""attn-yolo: attention blocks for Ultralytics YOLO model YAMLs, and tools to insert, ablate, export and inspect them.

``import attn_yolo`` registers the blocks with Ultralytics (see ``attn_yolo.registry``); afterwards any model YAML can
name them, e.g. ``[-1, 1, CBAM, [16, 7]]``, with input channels inferred from the layer the row reads.
``attn_yolo.load("best.pt")`` loads a checkpoint weights-only (plain ``YOLO("best.pt")`` is a full unpickle).
"""

from attn_yolo.checkpoint import CheckpointError, load
from attn_yolo.insertion import insert, transfer
from attn_yolo.nn import *  # noqa: F403  (every block class; attn_yolo.nn.__all__)
from attn_yolo.nn import AttnBuildError
from attn_yolo.registry import ALIASES, MODULES, ModelYamlError, UnknownModuleError, register, unregister
from attn_yolo.sdpa import fuse_attention, unfuse_attention

__version__ = "0.1.0"
__all__ = ["ALIASES", "MODULES", "AttnBuildError", "CheckpointError", "ModelYamlError", "UnknownModuleError"]
__all__ += ["fuse_attention", "insert", "load", "register", "transfer", "unfuse_attention", "unregister"]
__all__ += list(MODULES)  # every block class, by its YAML name (tests/test_blocks.py checks each resolves)

register()
