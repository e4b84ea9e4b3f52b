"""What a method trains on: each client's private data, prepared by the experiment builder.

Every client's data goes into that client's private party state only; the server's task view
holds no client data (a centralized baseline is the one exception, and it has no clients).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_geometric.data import Data

from securefg.methods.label_groups import LabelGroups


@dataclass
class NodeTask:
    """Node classification on subgraphs.

    Args:
        clients (list[Data]): Client k's subgraph with ``x, edge_index, y`` and
            ``train_mask / val_mask / test_mask``.
        num_features (int): Feature size d.
        num_classes (int): Number of classes C.
        full_graph (Data, optional): The whole graph (centralized baseline, FedStruct-A's
            server only).
    """

    clients: list[Data]
    num_features: int
    num_classes: int
    full_graph: Data | None = None
    extras: dict[str, object] = field(default_factory=dict)

    kind = "node"


@dataclass
class GraphTask:
    """Graph classification: each client holds labelled graphs; a global test set is held out.

    Args:
        train (list[list[Data]]): Client k's training graphs.
        val (list[list[Data]]): Client k's validation graphs.
        test (list[list[Data]]): Client k's local test graphs.
        global_test (list[Data]): The global test set (8:2 split) the global model is scored on.
        num_features (int): Node feature size.
        num_classes (int): Number of classes (in the global label space).
        label_groups (LabelGroups, optional): One head per dataset (several datasets); graphs
            are trained and scored on their own dataset's classes only.
    """

    train: list[list[Data]]
    val: list[list[Data]]
    test: list[list[Data]]
    global_test: list[Data]
    num_features: int
    num_classes: int
    extras: dict[str, object] = field(default_factory=dict)
    label_groups: LabelGroups | None = None

    kind = "graph"

    @property
    def num_clients(self) -> int:
        return len(self.train)
