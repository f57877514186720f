"""attn-yolo: attention blocks (SE, ECA, SAM, CBAM, MHSA) for Ultralytics YOLO model YAMLs.

``import attn_yolo`` registers the blocks with Ultralytics (see ``attn_yolo.registry``); afterwards any model YAML can
name them, e.g. ``[-1, 1, CBAM, [16, 7]]``, with input channels inferred from the layer the row reads.
"""

from attn_yolo.build import AttnBuildError
from attn_yolo.cbam import CBAM, SAM
from attn_yolo.eca import ECA
from attn_yolo.insertion import insert, transfer
from attn_yolo.mhsa import MHSA
from attn_yolo.registry import MODULES, UnknownModuleError, register, unregister
from attn_yolo.se import SE

__version__ = "0.1.0"
__all__ = ["CBAM", "ECA", "MHSA", "MODULES", "SAM", "SE", "AttnBuildError", "UnknownModuleError", "register", "unregister"]
__all__ += ["insert", "transfer"]

register()
