import collections
import pickle
import pickletools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from securefg.data.safe_pickle import ALLOWED_GLOBALS, load_pickle
from securefg.errors import DatasetFileError, UnsafeDataFileError
from tests.data.planetoid_files import CallOnLoad, crafted_calls, write_crafted


def _globals(path: Path) -> set[tuple[str, str]]:
    """The globals a pickle names (GLOBAL args; STACK_GLOBAL's two preceding strings)."""
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(path.read_bytes()):
        if op.name == "GLOBAL":
            module, name = arg.split(" ")
            found.add((module, name))
        elif op.name == "STACK_GLOBAL":
            found.add((strings[-2], strings[-1]))
        elif isinstance(arg, str):
            strings.append(arg)
    return found


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["Cora", "CiteSeer", "PubMed"])
def test_allow_list_covers_every_global_of_the_real_planetoid_files(data_root: Path, name: str) -> None:
    files = [p for p in sorted((data_root / name / "raw").glob("ind.*")) if not p.name.endswith("test.index")]
    if not files:
        pytest.skip(f"no {name} raw files under {data_root}")
    used = set().union(*(_globals(p) for p in files))
    assert used <= set(ALLOWED_GLOBALS), used - set(ALLOWED_GLOBALS)
    for p in files:
        load_pickle(p)  # and each loads with it


@pytest.mark.parametrize("call", ["os.system", "builtins.eval", "subprocess.call"])
@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_that_calls_code_is_refused_and_nothing_runs(tmp_path: Path, call: str, protocol: int) -> None:
    marker, path = tmp_path / "ran", tmp_path / "ind.cora.x"
    write_crafted(path, crafted_calls(marker)[call], protocol=protocol)
    with pytest.raises(UnsafeDataFileError, match=rf"^{path}: refused to load: the pickle calls \w+\.\w+") as info:
        load_pickle(path)
    assert info.value.path == str(path)
    assert not marker.exists()


def test_a_call_hidden_inside_an_allowed_container_is_refused(tmp_path: Path) -> None:
    marker, path = tmp_path / "ran", tmp_path / "ind.cora.graph"
    payload = collections.defaultdict(list, {0: [1], 1: crafted_calls(marker)["os.system"]})
    path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(UnsafeDataFileError, match="calls posix.system|calls nt.system"):
        load_pickle(path)
    assert not marker.exists()


def test_a_pickle_that_imports_a_module_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ind.cora.y"
    path.write_bytes(pickle.dumps(CallOnLoad(__import__, "os"), protocol=2))
    with pytest.raises(UnsafeDataFileError, match=r"calls (__builtin__|builtins)\.__import__"):
        load_pickle(path)


def test_a_truncated_pickle_is_a_typed_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ind.cora.allx"
    data = pickle.dumps(sp.csr_matrix(np.eye(4, dtype=np.float32)), protocol=4)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetFileError, match=rf"^{path}: cannot be read as a pickle .*truncated") as info:
        load_pickle(path)
    assert not isinstance(info.value, UnsafeDataFileError) and info.value.path == str(path)


def test_an_inconsistent_csr_record_is_refused_when_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "ind.cora.tx"
    bad = sp.csr_matrix(np.eye(3, dtype=np.float32))
    bad.indices = np.array([0, 7, 2], dtype=np.int32)  # column 7 of a 3-column matrix
    path.write_bytes(pickle.dumps(bad, protocol=4))
    record = load_pickle(path)
    with pytest.raises(DatasetFileError, match="inconsistent CSR matrix"):
        record.to_dense(str(path))


def test_a_csr_record_declaring_a_huge_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ind.cora.tx"
    huge = sp.csr_matrix((2**20, 2**20), dtype=np.float32)  # empty, but 2^40 dense elements
    path.write_bytes(pickle.dumps(huge, protocol=4))
    with pytest.raises(DatasetFileError, match="out of range"):
        load_pickle(path).to_dense(str(path))
