import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.datasets import Planetoid

from securefg.data import load_node_dataset, load_node_pyg_dataset
from securefg.errors import DatasetFileError, UnsafeDataFileError
from tests.data.planetoid_files import NODES, crafted_calls, write_crafted, write_tiny_planetoid


def _assert_same_data(ours: Planetoid, reference: Planetoid) -> None:
    a, b = ours[0], reference[0]
    assert sorted(a.keys()) == sorted(b.keys())
    for key in a.keys():  # noqa: SIM118 - iterating a Data yields (key, value) pairs
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


def test_tiny_planetoid_loads_exactly_as_pyg_processes_it(tmp_path: Path) -> None:
    from securefg.data.safe_planetoid import SafePlanetoid

    write_tiny_planetoid(tmp_path / "src")
    shutil.copytree(tmp_path / "src", tmp_path / "pyg")
    ours = load_node_pyg_dataset("Cora", tmp_path / "src")
    assert isinstance(ours, SafePlanetoid) and repr(ours) == "Cora()"
    assert ours[0].num_nodes == NODES
    _assert_same_data(ours, Planetoid(str(tmp_path / "pyg"), "Cora"))


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["Cora", "CiteSeer"])
def test_real_planetoid_sets_load_identically_to_pyg(data_root: Path, tmp_path: Path, name: str) -> None:
    ours = load_node_pyg_dataset(name, data_root)
    shutil.copytree(data_root / name / "raw", tmp_path / name / "raw")
    _assert_same_data(ours, Planetoid(str(tmp_path), name))  # PyG's own unpickler on the trusted files


@pytest.mark.parametrize("call", ["os.system", "builtins.eval", "subprocess.call"])
def test_a_crafted_raw_file_in_a_data_root_is_refused_naming_it_and_runs_nothing(tmp_path: Path, call: str) -> None:
    raw = write_tiny_planetoid(tmp_path / "root")
    marker = tmp_path / "ran"
    write_crafted(raw / "ind.cora.x", crafted_calls(marker)[call])
    with pytest.raises(UnsafeDataFileError, match=rf"^{raw / 'ind.cora.x'}: refused to load") as info:
        load_node_dataset("Cora", tmp_path / "root")
    assert info.value.path == str(raw / "ind.cora.x")  # the data root's file, not the work copy
    assert not marker.exists()


def test_a_truncated_raw_file_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    raw = write_tiny_planetoid(tmp_path / "root")
    data = (raw / "ind.cora.allx").read_bytes()
    (raw / "ind.cora.allx").write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetFileError, match=rf"^{raw / 'ind.cora.allx'}: cannot be read as a pickle"):
        load_node_dataset("Cora", tmp_path / "root")


def test_a_corrupt_test_index_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    raw = write_tiny_planetoid(tmp_path / "root")
    (raw / "ind.cora.test.index").write_text("510\nfive hundred\n")
    with pytest.raises(DatasetFileError, match=r"ind\.cora\.test\.index: not a list of integers"):
        load_node_dataset("Cora", tmp_path / "root")


def test_a_raw_file_of_the_wrong_kind_is_a_typed_error(tmp_path: Path) -> None:
    from securefg.data.safe_planetoid import read_planetoid_file

    raw = write_tiny_planetoid(tmp_path / "root")
    (raw / "ind.cora.ally").write_bytes(pickle.dumps(np.array(["a", "b"], dtype=object), protocol=4))
    with pytest.raises(DatasetFileError, match=r"ind\.cora\.ally: the matrix must be a numeric numpy array"):
        load_node_dataset("Cora", tmp_path / "root")
    (raw / "ind.cora.ally").write_bytes(pickle.dumps({"not": "a graph"}, protocol=2))
    with pytest.raises(DatasetFileError, match=r"ind\.cora\.ally: .*numeric numpy array, found dict"):
        read_planetoid_file(str(raw), "Cora", "ally")
    (raw / "ind.cora.graph").write_bytes(pickle.dumps({0: "1"}, protocol=2))
    with pytest.raises(DatasetFileError, match="adjacency lists"):
        read_planetoid_file(str(raw), "Cora", "graph")


def test_pyg_reader_stays_unpatched_outside_a_load(tmp_path: Path) -> None:
    import importlib

    fs = importlib.import_module("torch_geometric.io.fs")
    planetoid_io = importlib.import_module("torch_geometric.io.planetoid")

    before = planetoid_io.read_file, planetoid_io.pickle, fs.torch_load
    write_tiny_planetoid(tmp_path / "root")
    load_node_dataset("Cora", tmp_path / "root")
    assert (planetoid_io.read_file, planetoid_io.pickle, fs.torch_load) == before
