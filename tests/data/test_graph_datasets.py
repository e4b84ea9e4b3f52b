from pathlib import Path

import pytest
import torch

from securefg.data import load_graph_dataset
from securefg.data.graph_datasets import max_degree
from securefg.data.synthetic import make_graph_classification
from securefg.errors import ConfigError


def test_max_degree_of_synthetic_graphs() -> None:
    graphs = make_graph_classification(num_graphs=8, num_classes=4, min_nodes=7, max_nodes=7, seed=0)
    assert max_degree(graphs) == 6  # the wheel's hub


def test_node_dataset_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="use load_node_dataset"):
        load_graph_dataset("Cora", tmp_path)


@pytest.mark.realdata
def test_mutag_has_188_graphs(data_root: Path) -> None:
    ds = load_graph_dataset("mutag", data_root)
    assert (len(ds), ds.num_classes, ds.num_features) == (188, 2, 7)
    assert repr(ds) == "MUTAG(188)"


@pytest.mark.realdata
@pytest.mark.parametrize(("name", "graphs", "gcfl"), [("IMDB-BINARY", 1000, 135), ("IMDB-MULTI", 1500, 88)])
def test_imdb_gets_one_hot_degree_at_least_gcfl_width(
    data_root: Path, name: str, graphs: int, gcfl: int
) -> None:
    ds = load_graph_dataset(name, data_root)
    assert len(ds) == graphs
    actual = max_degree(ds)
    assert ds.num_features == max(actual, gcfl) + 1
    g = ds[0]
    assert torch.equal(g.x.argmax(1), torch.bincount(g.edge_index[0], minlength=g.num_nodes))
