"""CeFGC's graph generator: an EDP-GNN score model with annealed Langevin sampling.

Structure-only, dense, CPU-sized (the "smallest faithful CPU version" of the CeFGC notes,
Sec. 6.3), serialisable to flat named tensors so it can cross parties without pickle.
"""

from securefg.models.graph_score.config import EDPScoreConfig
from securefg.models.graph_score.dense import DenseGraphBatch, dense_to_graphs, to_dense_batch_adjacency
from securefg.models.graph_score.loss import condition_index, dsm_loss
from securefg.models.graph_score.metrics import (
    clustering_mmd,
    degree_mmd,
    graph_set_summary,
    mmd_squared,
)
from securefg.models.graph_score.model import DEFAULT_SIGMAS, GraphDiffusionModel
from securefg.models.graph_score.sampler import LangevinParams, annealed_langevin
from securefg.models.graph_score.score_network import EDPScoreNetwork
from securefg.models.graph_score.training import FitResult
from securefg.models.graph_score.tuning import SamplingTrial, select_sampling_params

__all__ = [
    "DEFAULT_SIGMAS",
    "DenseGraphBatch",
    "EDPScoreConfig",
    "EDPScoreNetwork",
    "FitResult",
    "GraphDiffusionModel",
    "LangevinParams",
    "SamplingTrial",
    "annealed_langevin",
    "clustering_mmd",
    "condition_index",
    "degree_mmd",
    "dense_to_graphs",
    "dsm_loss",
    "graph_set_summary",
    "mmd_squared",
    "select_sampling_params",
    "to_dense_batch_adjacency",
]
