"""Model-side pieces of FedStruct (`Aliakbari et al. <https://arxiv.org/abs/2402.19163>`_).

Propagation matrices, Algorithm 3 math for each client's rows of Ā, node structure features
(degree, Node2Vec, Hop2Vec), the decoupled GCN with per-client forward/gradient pieces, and a
single-process reference trainer with the paper's baselines. Transport, masking and
orchestration live elsewhere (``securefg.protocol`` / ``securefg.methods``).
"""

from securefg.models.fedstruct.abar_protocol import (
    AbarState,
    adjacency_block,
    assemble,
    column_blocks,
    compute_abar_rows,
    init_abar_state,
    local_contributions,
)
from securefg.models.fedstruct.baselines import (
    GNNBaselineConfig,
    train_central_gnn,
    train_fl_gnn,
    train_local_gnn,
)
from securefg.models.fedstruct.central_trainer import FedStructConfig, train_fedstruct_central
from securefg.models.fedstruct.client_graph_view import ClientGraphView, split_graph
from securefg.models.fedstruct.client_step import (
    ClientBatch,
    ClientGradients,
    aggregate_structure_gradients,
    client_gradients,
    client_gradients_given_nse,
    client_logits,
    client_loss,
    compact_columns,
    local_propagation,
    make_client_batch,
)
from securefg.models.fedstruct.decoupled_gcn import FedStructDGCN
from securefg.models.fedstruct.degree_features import degree_features
from securefg.models.fedstruct.hop2vec import Hop2Vec
from securefg.models.fedstruct.node2vec import Node2Vec, train_node2vec
from securefg.models.fedstruct.node_directory import NodeDirectory
from securefg.models.fedstruct.partition import NodeSplit, random_node_partition, random_node_split
from securefg.models.fedstruct.propagation import (
    last_hop_betas,
    multi_hop_adjacency,
    prune_top_p_rows,
    rw_normalized_adjacency,
)
from securefg.models.fedstruct.random_walk import biased_random_walks
from securefg.models.fedstruct.run_result import RunResult

__all__ = [
    "AbarState",
    "ClientBatch",
    "ClientGradients",
    "ClientGraphView",
    "FedStructConfig",
    "FedStructDGCN",
    "GNNBaselineConfig",
    "Hop2Vec",
    "Node2Vec",
    "NodeDirectory",
    "NodeSplit",
    "RunResult",
    "adjacency_block",
    "aggregate_structure_gradients",
    "assemble",
    "biased_random_walks",
    "client_gradients",
    "client_gradients_given_nse",
    "client_logits",
    "client_loss",
    "column_blocks",
    "compact_columns",
    "compute_abar_rows",
    "degree_features",
    "init_abar_state",
    "last_hop_betas",
    "local_contributions",
    "local_propagation",
    "make_client_batch",
    "multi_hop_adjacency",
    "prune_top_p_rows",
    "random_node_partition",
    "random_node_split",
    "rw_normalized_adjacency",
    "split_graph",
    "train_central_gnn",
    "train_fedstruct_central",
    "train_fl_gnn",
    "train_local_gnn",
    "train_node2vec",
]
