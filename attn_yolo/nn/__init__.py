"""The attention blocks, one file per family; plain ``nn.Module`` classes that know nothing of Ultralytics.

Each block file declares its block (``attn_yolo.nn.declaration.declare``); importing this package declares them all,
in the order below (the order of ``attn_yolo.registry.MODULES``, ``attn-yolo modules`` and docs/copies.md).

Their module paths are part of the checkpoint format (Ultralytics pickles whole models): ``attn_yolo.nn.se.SE``,
``attn_yolo.nn.eca.ECA``, ``attn_yolo.nn.cbam.CBAM`` / ``SAM``, ``attn_yolo.nn.mhsa.MHSA``,
``attn_yolo.nn.coordatt.CoordAtt``, ``attn_yolo.nn.ema.EMA``, ``attn_yolo.nn.simam.SimAM``, ``attn_yolo.nn.gam.GAM``,
``attn_yolo.nn.shuffle.ShuffleAttention``, ``attn_yolo.nn.triplet.TripletAttention``, ``attn_yolo.nn.nam.NAM``,
``attn_yolo.nn.lska.LSKA``, ``attn_yolo.nn.mlca.MLCA``, ``attn_yolo.nn.ela.ELA``, ``attn_yolo.nn.caa.CAA``,
``attn_yolo.nn.sk.SKAttention``, ``attn_yolo.nn.biformer.BiLevelRoutingAttention``.
"""

# isort: skip_file
# (the import order is the declaration order)
from attn_yolo.nn.se import SE
from attn_yolo.nn.eca import ECA
from attn_yolo.nn.cbam import SAM, CBAM
from attn_yolo.nn.mhsa import MHSA
from attn_yolo.nn.coordatt import CoordAtt
from attn_yolo.nn.ema import EMA
from attn_yolo.nn.simam import SimAM
from attn_yolo.nn.gam import GAM
from attn_yolo.nn.shuffle import ShuffleAttention
from attn_yolo.nn.triplet import TripletAttention
from attn_yolo.nn.nam import NAM
from attn_yolo.nn.lska import LSKA
from attn_yolo.nn.mlca import MLCA
from attn_yolo.nn.ela import ELA
from attn_yolo.nn.caa import CAA
from attn_yolo.nn.sk import SKAttention
from attn_yolo.nn.biformer import BiLevelRoutingAttention
from attn_yolo.nn.placebo import Placebo
from attn_yolo.nn.common import AttnBuildError
from attn_yolo.nn.declaration import DECLARATIONS, Declaration, Param, declare
from attn_yolo.nn.layer_scale import LayerScale

__all__ = ["CBAM", "ECA", "MHSA", "SAM", "SE", "AttnBuildError", "LayerScale"]
__all__ += ["EMA", "GAM", "NAM", "CoordAtt", "ShuffleAttention", "SimAM", "TripletAttention"]
__all__ += ["CAA", "ELA", "LSKA", "MLCA"]
__all__ += ["BiLevelRoutingAttention", "SKAttention"]
__all__ += ["DECLARATIONS", "Declaration", "Param", "Placebo", "declare"]
