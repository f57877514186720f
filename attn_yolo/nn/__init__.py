"""The attention blocks, one file per family; plain ``nn.Module`` classes that know nothing of Ultralytics.

Their module paths are part of the checkpoint format (Ultralytics pickles whole models): ``attn_yolo.nn.se.SE``,
``attn_yolo.nn.eca.ECA``, ``attn_yolo.nn.cbam.CBAM`` / ``SAM``, ``attn_yolo.nn.mhsa.MHSA``,
``attn_yolo.nn.coordatt.CoordAtt``, ``attn_yolo.nn.ema.EMA``, ``attn_yolo.nn.simam.SimAM``, ``attn_yolo.nn.gam.GAM``,
``attn_yolo.nn.shuffle.ShuffleAttention``, ``attn_yolo.nn.triplet.TripletAttention``, ``attn_yolo.nn.nam.NAM``,
``attn_yolo.nn.lska.LSKA``, ``attn_yolo.nn.mlca.MLCA``, ``attn_yolo.nn.ela.ELA``, ``attn_yolo.nn.caa.CAA``,
``attn_yolo.nn.sk.SKAttention``, ``attn_yolo.nn.biformer.BiLevelRoutingAttention``.
"""

from attn_yolo.nn.biformer import BiLevelRoutingAttention
from attn_yolo.nn.caa import CAA
from attn_yolo.nn.cbam import CBAM, SAM
from attn_yolo.nn.common import C1, AttnBuildError
from attn_yolo.nn.coordatt import CoordAtt
from attn_yolo.nn.eca import ECA
from attn_yolo.nn.ela import ELA
from attn_yolo.nn.ema import EMA
from attn_yolo.nn.gam import GAM
from attn_yolo.nn.layer_scale import LayerScale
from attn_yolo.nn.lska import LSKA
from attn_yolo.nn.mhsa import MHSA
from attn_yolo.nn.mlca import MLCA
from attn_yolo.nn.nam import NAM
from attn_yolo.nn.se import SE
from attn_yolo.nn.shuffle import ShuffleAttention
from attn_yolo.nn.simam import SimAM
from attn_yolo.nn.sk import SKAttention
from attn_yolo.nn.triplet import TripletAttention

__all__ = ["C1", "CBAM", "ECA", "MHSA", "SAM", "SE", "AttnBuildError", "LayerScale"]
__all__ += ["EMA", "GAM", "NAM", "CoordAtt", "ShuffleAttention", "SimAM", "TripletAttention"]
__all__ += ["CAA", "ELA", "LSKA", "MLCA"]
__all__ += ["BiLevelRoutingAttention", "SKAttention"]
