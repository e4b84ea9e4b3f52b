from __future__ import annotations

import pytest
from torch_geometric.data import Data

from securefg.data.synthetic import make_csbm


@pytest.fixture(scope="module")
def graph() -> Data:
    """A 600-node, 4-class homophilous CSBM graph with informative features."""
    return make_csbm(
        num_nodes=600, num_classes=4, num_features=8, p_in=0.04, p_out=0.002, feature_signal=4.0, seed=0
    )
