"""Smoke and wiring tests of the single-process reference trainer (accuracy runs are offline)."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from securefg.errors import ConfigError
from securefg.models.fedstruct.baselines import (
    GNNBaselineConfig,
    train_central_gnn,
    train_fl_gnn,
    train_local_gnn,
)
from securefg.models.fedstruct.central_trainer import FedStructConfig, train_fedstruct_central
from securefg.models.fedstruct.partition import random_node_partition, random_node_split

from ._graphs import random_graph

TINY = FedStructConfig(epochs=4, structure_hops=2, local_hops=1, structure_dim=8,
                       feature_hidden=(8,), structure_hidden=(8,), node2vec_epochs=1)


@pytest.fixture(scope="module")
def data() -> Data:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(3, (60,), generator=g)
    x = torch.nn.functional.one_hot(y, 3).float() + 0.5 * torch.randn(60, 3, generator=g)
    return Data(x=x, y=y, edge_index=random_graph(60, 150, seed=0))


@pytest.mark.parametrize("nsf", ["hop2vec", "node2vec", "degree"])
def test_trainer_runs_for_every_nsf(data: Data, nsf: str) -> None:
    owner = random_node_partition(60, 4, generator=torch.Generator().manual_seed(0))
    r = train_fedstruct_central(data, owner, nsf=nsf, config=TINY, seed=0)
    assert r.method == f"fedstruct-{nsf}"
    assert 0.0 <= r.test_acc <= 1.0 and 1 <= r.best_epoch <= 4
    assert len(r.per_client_test_acc) == 4


def test_algorithm3_mode_gives_the_same_run_as_central_abar(data: Data) -> None:
    owner = random_node_partition(60, 3, generator=torch.Generator().manual_seed(1))
    a = train_fedstruct_central(data, owner, nsf="degree", config=TINY, seed=1)
    b = train_fedstruct_central(data, owner, nsf="degree", config=TINY, seed=1,
                                abar_mode="algorithm3")
    assert (a.test_acc, a.val_acc, a.best_epoch) == (b.test_acc, b.val_acc, b.best_epoch)


def test_unknown_nsf_lists_the_choices(data: Data) -> None:
    with pytest.raises(ConfigError, match="Could not resolve nsf='gdv' among choices"):
        train_fedstruct_central(data, torch.zeros(60, dtype=torch.long), nsf="gdv")


def test_config_collects_every_problem() -> None:
    with pytest.raises(ConfigError, match=r"(?s)betas has 2 entries.*optimizer 'lbfgs'"):
        FedStructConfig(betas=(0.5, 0.5), optimizer="lbfgs")  # type: ignore[arg-type]


def test_baselines_run(data: Data) -> None:
    owner = random_node_partition(60, 3, generator=torch.Generator().manual_seed(2))
    split = random_node_split(owner, train_ratio=0.3, generator=torch.Generator().manual_seed(2))
    cfg = GNNBaselineConfig(hidden=8, num_layers=2, epochs=3)
    for r in (train_central_gnn(data, split, config=cfg), train_fl_gnn(data, owner, split, config=cfg),
              train_local_gnn(data, owner, split, config=cfg)):
        assert 0.0 <= r.test_acc <= 1.0
    assert len(train_local_gnn(data, owner, split, config=cfg).per_client_test_acc) == 3
