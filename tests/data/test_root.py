import os
import re
import stat
import urllib.error
from pathlib import Path

import pytest
from torch_geometric.datasets import Planetoid

from securefg.data import load_node_dataset
from securefg.data.catalog import get_spec
from securefg.data.root import prepare, resolve_root, work_root
from securefg.errors import DatasetNotFoundError


def test_root_precedence_explicit_then_env_then_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECUREFG_DATA", str(tmp_path / "env"))
    assert resolve_root(tmp_path / "explicit") == (tmp_path / "explicit").resolve()
    assert resolve_root() == (tmp_path / "env").resolve()
    monkeypatch.delenv("SECUREFG_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_root() == (tmp_path / "xdg" / "securefg" / "datasets").resolve()


def _fake_tu(root: Path, name: str = "MUTAG") -> Path:
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    # Two graphs: a triangle (label 0) and a path of 3 nodes (label 1).
    (raw / f"{name}_A.txt").write_text("1, 2\n2, 1\n2, 3\n3, 2\n1, 3\n3, 1\n4, 5\n5, 4\n5, 6\n6, 5\n")
    (raw / f"{name}_graph_indicator.txt").write_text("1\n1\n1\n2\n2\n2\n")
    (raw / f"{name}_graph_labels.txt").write_text("0\n1\n")
    return raw


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _writable(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_prepare_copies_raw_to_cache_and_never_writes_the_source(tmp_path: Path) -> None:
    src = tmp_path / "shared"
    raw = _fake_tu(src)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    _read_only(src)
    try:
        work = prepare("mutag", src)
        assert work == work_root(src.resolve())
        assert (work / "MUTAG" / "raw" / "MUTAG_A.txt").read_text() == (raw / "MUTAG_A.txt").read_text()
        from securefg.data import load_graph_dataset

        ds = load_graph_dataset("MUTAG", src)  # PyG processes inside the work copy only
        assert len(ds) == 2
        assert (work / "MUTAG" / "processed").is_dir()
        assert sorted(p.relative_to(src) for p in src.rglob("*")) == before
    finally:
        _writable(src)


def test_prepare_drops_stale_processed_files_when_raw_changes(tmp_path: Path) -> None:
    from securefg.data import load_graph_dataset

    src = tmp_path / "shared"
    raw = _fake_tu(src)
    assert load_graph_dataset("MUTAG", src)[1].y.item() == 1
    (raw / "MUTAG_graph_labels.txt").write_text("0\n0\n")
    os.utime(raw / "MUTAG_graph_labels.txt", ns=(1, 10**18))  # make the change visible even on coarse clocks
    assert load_graph_dataset("MUTAG", src)[1].y.item() == 0


def test_missing_dataset_offline_names_folder_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")
    folder = re.escape(str(tmp_path / "Cora" / "raw"))
    files = r"ind\.cora\.x.*ind\.cora\.test\.index"
    with pytest.raises(
        DatasetNotFoundError, match=rf"(?s)missing raw files in {folder}.*{files}.*SECUREFG_OFFLINE=1"
    ):
        load_node_dataset("cora", tmp_path)


def test_partial_raw_folder_names_only_the_missing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")
    spec = get_spec("PubMed")
    raw = tmp_path / spec.raw_dir
    raw.mkdir(parents=True)
    for f in spec.raw_files:
        if f != "ind.pubmed.allx":
            (raw / f).write_bytes(b"")
    with pytest.raises(DatasetNotFoundError, match=r"missing raw files in .*PubMed/raw: ind\.pubmed\.allx\."):
        load_node_dataset("PubMed", tmp_path)


def test_network_failure_becomes_dataset_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def no_network(self: Planetoid) -> None:
        calls.append(self.raw_dir)
        raise urllib.error.URLError("Network is unreachable")

    monkeypatch.setattr(Planetoid, "download", no_network)
    with pytest.raises(
        DatasetNotFoundError, match=r"(?s)CiteSeer/raw.*could not download them either \(URLError"
    ):
        load_node_dataset("CiteSeer", tmp_path)
    assert len(calls) == 1  # PyG was allowed to try, once, inside the work copy
    assert Path(calls[0]).is_relative_to(work_root(tmp_path.resolve()))


def test_offline_flag_stops_pyg_from_trying(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")
    monkeypatch.setattr(Planetoid, "download", lambda self: pytest.fail("download attempted offline"))
    with pytest.raises(DatasetNotFoundError, match="Downloads are disabled"):
        load_node_dataset("Cora", tmp_path)


def test_offline_run_reuses_files_an_earlier_download_left_in_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "shared"
    raw = _fake_tu(src)
    labels = (raw / "MUTAG_graph_labels.txt").read_text()
    (raw / "MUTAG_graph_labels.txt").unlink()
    monkeypatch.setenv("SECUREFG_OFFLINE", "1")
    with pytest.raises(DatasetNotFoundError, match=r"MUTAG/raw: MUTAG_graph_labels\.txt\."):
        prepare("MUTAG", src)
    copy = work_root(src.resolve()) / "MUTAG" / "raw" / "MUTAG_graph_labels.txt"
    copy.write_text(labels)  # what a successful online download would have left
    assert prepare("MUTAG", src) == work_root(src.resolve())


def test_a_second_loader_waits_while_the_dataset_is_being_processed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs that process a dataset at once must not read each other's half-written file."""
    import subprocess
    import sys
    import time

    from securefg.data.root import dataset_lock

    src = tmp_path / "shared"
    _fake_tu(src)
    cache = tmp_path / "cache"
    monkeypatch.setenv("SECUREFG_CACHE", str(cache))
    done = tmp_path / "loaded.txt"
    script = (
        "from securefg.data import load_graph_dataset; print('ready', flush=True); "
        f"ds = load_graph_dataset('MUTAG', {str(src)!r}); open({str(done)!r}, 'w').write(str(len(ds)))"
    )
    env = {**os.environ, "SECUREFG_CACHE": str(cache)}
    with dataset_lock(work_root(src.resolve()), "MUTAG"):
        child = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(2.0)  # unlocked, loading two tiny graphs takes well under this
        assert child.poll() is None and not done.exists()
    assert child.wait(timeout=120) == 0
    assert done.read_text() == "2"
