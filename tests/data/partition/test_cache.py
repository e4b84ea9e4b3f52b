from pathlib import Path

import torch
from torch_geometric.data import Data

from securefg.data.partition import MetisPartitioner, Partition, RandomPartitioner


def test_cached_partition_is_saved_under_its_parameters_and_reloaded(graph: Data, tmp_path: Path) -> None:
    part = MetisPartitioner(4, seed=1)
    first = part.cached(graph, tmp_path)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith("metis-num_parts=4-seed=1-recursive=False-")
    # Tamper with the cached file: a second call must read it rather than recompute.
    tampered = Partition.from_assignment(
        torch.zeros(graph.num_nodes, dtype=torch.long), num_parts=4, name="metis"
    )
    tampered.save(files[0])
    assert part.cached(graph, tmp_path) == tampered != first


def test_cache_key_changes_with_the_data(graph: Data, tmp_path: Path) -> None:
    part = MetisPartitioner(4, seed=1)
    part.cached(graph, tmp_path)
    shifted = Data(edge_index=graph.edge_index[:, 10:], num_nodes=graph.num_nodes)
    part.cached(shifted, tmp_path)
    assert len(list(tmp_path.iterdir())) == 2


def test_cache_defaults_to_securefg_cache(graph: Data, _isolated_cache: Path) -> None:
    RandomPartitioner(2, seed=0).cached(graph)
    assert len(list((_isolated_cache / "partitions").iterdir())) == 1
