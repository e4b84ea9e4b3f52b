import os
from pathlib import Path

import pytest
import torch

from securefg.data import load_graph_dataset, load_node_dataset
from securefg.data.root import resolve_root, work_root
from securefg.errors import DatasetFileError, UnsafeDataFileError
from tests.data.planetoid_files import CallOnLoad, write_tiny_planetoid


def _processed(root: Path) -> Path:
    load_node_dataset("Cora", root)  # first load writes the work copy's processed/ folder
    folder = work_root(resolve_root(root)) / "Cora" / "processed"
    assert (folder / "data.pt").is_file() and (folder / "pre_transform.pt").is_file()
    return folder


@pytest.mark.parametrize("name", ["data.pt", "pre_transform.pt", "pre_filter.pt"])
def test_a_crafted_processed_file_is_refused_without_pyg_retrying_unsafely(tmp_path: Path, name: str) -> None:
    write_tiny_planetoid(tmp_path / "root")
    folder = _processed(tmp_path / "root")
    marker = tmp_path / "ran"
    torch.save(CallOnLoad(os.system, f"touch {marker}"), folder / name)
    with pytest.raises(UnsafeDataFileError, match=rf"{folder / name}: refused to load: it names \w+\.system"):
        load_node_dataset("Cora", tmp_path / "root")
    assert not marker.exists()


def test_a_truncated_processed_file_is_a_typed_error_saying_what_to_delete(tmp_path: Path) -> None:
    write_tiny_planetoid(tmp_path / "root")
    folder = _processed(tmp_path / "root")
    data = (folder / "data.pt").read_bytes()
    (folder / "data.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetFileError, match=rf"data\.pt: truncated or corrupt .*; delete {folder}"):
        load_node_dataset("Cora", tmp_path / "root")


def test_a_corrupt_tu_file_is_a_typed_error_naming_the_raw_folder(tmp_path: Path) -> None:
    raw = tmp_path / "MUTAG" / "raw"
    raw.mkdir(parents=True)
    (raw / "MUTAG_A.txt").write_text("1, 2\n2, 1\n2, x\n")  # a damaged byte
    (raw / "MUTAG_graph_indicator.txt").write_text("1\n1\n1\n2\n2\n2\n")
    (raw / "MUTAG_graph_labels.txt").write_text("0\n1\n")
    with pytest.raises(DatasetFileError, match=rf"Dataset 'MUTAG': could not read a file in {raw} \(ValueError"):
        load_graph_dataset("MUTAG", tmp_path)
