"""The attention blocks, one file per family; plain ``nn.Module`` classes that know nothing of Ultralytics.

Their module paths are part of the checkpoint format (Ultralytics pickles whole models): ``attn_yolo.nn.se.SE``,
``attn_yolo.nn.eca.ECA``, ``attn_yolo.nn.cbam.CBAM`` / ``SAM``, ``attn_yolo.nn.mhsa.MHSA``.
"""

from attn_yolo.nn.cbam import CBAM, SAM
from attn_yolo.nn.common import C1, AttnBuildError
from attn_yolo.nn.eca import ECA
from attn_yolo.nn.layer_scale import LayerScale
from attn_yolo.nn.mhsa import MHSA
from attn_yolo.nn.se import SE

__all__ = ["C1", "CBAM", "ECA", "MHSA", "SAM", "SE", "AttnBuildError", "LayerScale"]
