"""``securefg run`` checks its arguments before importing torch: wrong ones are answered at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from securefg.commands.preflight import DOWNLOAD_HOSTS, check_data_present, check_partition, check_run
from securefg.data.catalog import CATALOG
from securefg.data.root import work_root
from securefg.errors import ConfigError, DatasetNotFoundError
from securefg.run_config import GRAPH_PARTITIONS, NODE_PARTITIONS, RunConfig, dataset_kind

REPO = Path(__file__).resolve().parents[2]

#: Invocations that must fail before torch is imported, and a word of their one error line.
FAST_FAILURES = [
    (["--method", "fedavgg", "--dataset", "Cora"], "Could not resolve method 'fedavgg'"),
    (["--method", "fedavg", "--dataset", "Coraa"], "Could not resolve dataset 'Coraa'"),
    (["--method", "fedavg", "--dataset", "Cora", "--rounds", "0"], "rounds must be an integer >= 1"),
    (["--method", "fedavg", "--dataset", "Cora", "--partition", "single"], "is for graph datasets"),
    (["--method", "fedpub", "--dataset", "MUTAG"], "does node classification"),
    (["--method", "fedavg", "--dataset", "Cora", "--protocol", "nope"], "protocol stack 'nope' not found"),
    (["--method", "fedavg", "--dataset", "Cora", "--data-root", "{empty}"], "DatasetNotFoundError"),
]


@pytest.mark.parametrize(("args", "message"), FAST_FAILURES)
def test_a_wrong_argument_fails_in_one_line_before_torch_is_imported(args: list[str], message: str,
                                                                        tmp_path: Path) -> None:
    argv = ["run", *[a.replace("{empty}", str(tmp_path / "empty")) for a in args], "--out", str(tmp_path / "out")]
    probe = ("import sys; from securefg.cli import main; code = main(sys.argv[1:]); "
             "print('torch imported' if 'torch' in sys.modules else 'no torch'); sys.exit(code)")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe, *argv], cwd=REPO, capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "SECUREFG_OFFLINE": "1", "SECUREFG_CACHE": str(tmp_path / "c"),
                               "HOME": str(tmp_path), "PYTHONPATH": str(REPO)})
    seconds = time.perf_counter() - t0
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == "no torch"
    assert done.stderr.startswith("securefg: error: ") and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert seconds < 10  # about 0.4 s on a 2-core machine; the bound only catches a heavy import coming back


def test_every_partition_name_is_one_the_run_knows() -> None:
    from securefg.experiment_data import NODE_PARTITIONS as BUILT

    assert set(NODE_PARTITIONS) == set(BUILT)
    check_partition(None, "node", "Cora")
    for name in NODE_PARTITIONS:
        check_partition(name.upper(), "node", "Cora")
    for name in GRAPH_PARTITIONS:
        check_partition(name, "graph", "MUTAG")
    with pytest.raises(ConfigError, match="'metis' is for node datasets; MUTAG is a graph"):
        check_partition("metis", "graph", "MUTAG")
    with pytest.raises(ConfigError, match="'meits' is unknown; Cora is a node"):
        check_partition("meits", "node", "Cora")


def test_dataset_kinds_cover_presets_joins_and_synthetic_sets() -> None:
    assert dataset_kind("cora") == "node" and dataset_kind("csbm") == "node"
    assert dataset_kind("Mix") == "graph" and dataset_kind("ENZYMES+PROTEINS") == "graph"
    assert dataset_kind("synthetic-graphs") == "graph"
    with pytest.raises(ConfigError, match=r"\['Cora'\] are node datasets"):
        dataset_kind("MUTAG+Cora")


def test_missing_files_fail_at_once_offline_and_a_copy_in_the_cache_counts(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "root"
    with pytest.raises(DatasetNotFoundError, match="--data-root DIR") as info:
        check_data_present("MUTAG", str(root))
    assert "root=" in str(info.value) and "Downloads are disabled" in str(info.value)
    spec = CATALOG["MUTAG"]
    copy = work_root(root.resolve()) / spec.raw_dir  # an earlier online run downloaded them here
    copy.mkdir(parents=True)
    for f in spec.raw_files:
        (copy / f).write_text("")
    check_data_present("MUTAG", str(root))
    check_data_present("csbm", None)


def test_an_unresolvable_download_host_is_a_missing_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def no_dns(*_: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.delenv("SECUREFG_OFFLINE", raising=False)
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(DatasetNotFoundError, match="cannot resolve github.com"):
        check_run(RunConfig(method="fedavg", dataset="Cora", data_root=str(tmp_path)))


def test_download_hosts_are_those_of_pygs_dataset_classes() -> None:
    from urllib.parse import urlparse

    import torch_geometric.datasets as pyg

    urls = {"planetoid": pyg.Planetoid.url, "amazon": pyg.Amazon.url, "coauthor": pyg.Coauthor.url,
            "wikipedia": pyg.WikipediaNetwork.processed_url, "actor": pyg.Actor.url,  # geom-gcn layout
            "heterophilous": pyg.HeterophilousGraphDataset.url, "tu": pyg.TUDataset.url}
    assert {s.family for s in CATALOG.values()} == set(DOWNLOAD_HOSTS)
    assert {k: urlparse(u).hostname for k, u in urls.items()} == DOWNLOAD_HOSTS
