from pathlib import Path

import pytest
import torch

from securefg.data import load_node_dataset, load_node_pyg_dataset
from securefg.data.catalog import get_spec
from securefg.errors import ConfigError, DatasetNotFoundError


def test_unknown_or_graph_level_names_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Could not resolve dataset 'karate' among choices \['Actor'"):
        load_node_dataset("karate", tmp_path)
    with pytest.raises(ConfigError, match="use load_graph_dataset"):
        load_node_dataset("ENZYMES", tmp_path)


@pytest.mark.realdata
def test_cora_full_and_fedpub_preprocessed(data_root: Path) -> None:
    full = load_node_dataset("cora", data_root)
    assert (full.num_nodes, full.num_edges, full.num_features) == (2708, 10556, 1433)
    lcc = load_node_dataset("Cora", data_root, largest_cc=True, normalize_features=True)
    assert (lcc.num_nodes, lcc.num_edges) == (2485, 10138)  # FED-PUB Table 4 "Ori"
    sums = lcc.x.sum(1)
    assert torch.allclose(sums[sums > 0], torch.ones(int((sums > 0).sum())))
    assert not torch.allclose(full.x.sum(1), torch.ones(2708))  # the transform did not leak back


@pytest.mark.realdata
def test_citeseer_lcc_matches_fedpub(data_root: Path) -> None:
    data = load_node_dataset("citeseer", data_root, largest_cc=True)
    assert (data.num_nodes, data.num_edges) == (2120, 7358)


@pytest.mark.realdata
def test_pubmed_is_reported_missing_offline(data_root: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"PubMed/raw: ind\.pubmed\.allx"):
        load_node_dataset("PubMed", data_root)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "nodes", "edges", "classes"),
    [("chameleon", 2277, 36101, 5), ("Actor", 7600, 30019, 5), ("Minesweeper", 10000, 78804, 2)],
)
def test_heterophilous_sets_load_with_their_ten_splits(
    data_root: Path, name: str, nodes: int, edges: int, classes: int
) -> None:
    data = load_node_dataset(name, data_root)
    assert (data.num_nodes, data.num_edges, int(data.y.max()) + 1) == (nodes, edges, classes)
    assert data.train_mask.shape == (nodes, 10)


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["Cora", "chameleon", "Actor", "Minesweeper", "Photo"])
def test_catalog_raw_files_agree_with_pyg(data_root: Path, name: str) -> None:
    spec = get_spec(name)
    ds = load_node_pyg_dataset(name, data_root)
    assert set(ds.raw_file_names if isinstance(ds.raw_file_names, list) else [ds.raw_file_names]) == set(
        spec.raw_files
    )
    assert Path(ds.raw_dir).as_posix().endswith(spec.raw_dir)
    assert not (data_root / spec.dataset_dir / "processed").exists()  # shared root never written
