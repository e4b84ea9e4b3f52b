"""An allow-list unpickler for the pickled raw files of Planetoid (``ind.cora.x`` and the like).

Why: PyG's ``read_planetoid_data`` calls ``pickle.load`` on the raw files, and a pickle may call any
importable function (``os.system``, ``builtins.eval``, ``subprocess.Popen``) while it loads.
securefg reads data roots that other people hand over, so these files are read here instead, by an
unpickler that resolves only the few globals the published files use, and maps even those to
plain stand-ins where it can:

* ``numpy.core.multiarray._reconstruct``, ``numpy.ndarray``, ``numpy.dtype``: numpy arrays, built
  by numpy's own ``__setstate__`` (object and structured dtypes are refused after loading);
* ``scipy.sparse.csr.csr_matrix``: a :class:`PickledCsr` record of the pickled attributes, from
  which :meth:`PickledCsr.to_dense` builds and format-checks a fresh ``csr_matrix``, so no scipy
  code runs while unpickling;
* ``collections.defaultdict`` and ``builtins.list``: the adjacency lists, loaded as a plain ``dict``.

Any other global, and any persistent id, raises :class:`~securefg.errors.UnsafeDataFileError`
when the unpickler meets it, before it is called. The list is the one the real Cora, CiteSeer
and PubMed files need (``pickletools.genops`` over each); ``tests/data/test_safe_pickle.py``
checks it against them.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from securefg.errors import DatasetFileError, UnsafeDataFileError

try:  # numpy >= 2 moved the module; pickles name either spelling
    from numpy._core.multiarray import _reconstruct
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]

#: Largest dense matrix (elements) a raw file may ask for: a crafted shape could ask for terabytes.
MAX_DENSE_ELEMENTS = 2**31

#: Numpy dtype kinds a raw array may have: bool, signed and unsigned integers, floats.
NUMERIC_KINDS = "biuf"


class PickledCsr:
    """The attributes a pickled ``scipy.sparse.csr_matrix`` carried, held as plain data.

    The unpickler builds this record instead of a scipy object, so the stream can only fill in a
    dictionary; :meth:`to_dense` then builds the matrix through scipy's public constructor.
    """

    def to_dense(self, path: str) -> np.ndarray:
        """Build the matrix from ``data``/``indices``/``indptr``/``_shape``, checked, as a dense array.

        Args:
            path (str): The file it came from, named in errors.

        Raises:
            DatasetFileError: Missing or ill-typed fields, an inconsistent CSR structure, or a
                shape above :data:`MAX_DENSE_ELEMENTS`.
        """
        state = vars(self)
        try:
            data, indices, indptr = (numeric_array(state[k], path=path, what=k) for k in ("data", "indices", "indptr"))
            rows, cols = (int(n) for n in state["_shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise DatasetFileError(f"{path}: not a CSR matrix ({type(exc).__name__}: {exc})", path=path) from exc
        if rows < 0 or cols < 0 or rows * cols > MAX_DENSE_ELEMENTS:
            raise DatasetFileError(f"{path}: matrix shape {(rows, cols)} is out of range", path=path)
        try:
            matrix = sp.csr_matrix((data, indices, indptr), shape=(rows, cols))
            matrix.check_format(full_check=True)
        except (ValueError, TypeError) as exc:
            raise DatasetFileError(f"{path}: inconsistent CSR matrix ({exc})", path=path) from exc
        return matrix.toarray()


def _plain_dict(default_factory: object = None) -> dict[Any, Any]:
    """Stand-in for ``collections.defaultdict``: the adjacency lists need only a plain dict."""
    return {}


#: Every global a Planetoid pickle may name, and what it resolves to.
ALLOWED_GLOBALS: dict[tuple[str, str], Callable[..., Any]] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("scipy.sparse.csr", "csr_matrix"): PickledCsr,
    ("scipy.sparse._csr", "csr_matrix"): PickledCsr,
    ("scipy.sparse", "csr_matrix"): PickledCsr,
    ("collections", "defaultdict"): _plain_dict,
    ("__builtin__", "list"): list,  # Python 2 pickles (the published files)
    ("builtins", "list"): list,
}


class AllowListUnpickler(pickle.Unpickler):
    """A :class:`pickle.Unpickler` that resolves only :data:`ALLOWED_GLOBALS`.

    Args:
        file (BinaryIO): The open pickle.
        path (str): The file's path, named in the error.

    Raises:
        UnsafeDataFileError: (from :meth:`load`) The stream names any other global or a
            persistent id; nothing it names has been called.
    """

    def __init__(self, file: io.BufferedIOBase, *, path: str) -> None:
        super().__init__(file, encoding="latin1")  # Python 2 numpy pickles hold raw byte strings
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        """Resolve ``module.name`` from the allow-list only (never imports anything)."""
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise UnsafeDataFileError(
                f"{self.path}: refused to load: the pickle calls {module}.{name}, which is not among the "
                f"numpy/scipy/list types a dataset file needs (nothing was run); replace the file with the "
                f"original from its publisher",
                path=self.path,
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        """Refuse persistent ids (no dataset file has them)."""
        raise UnsafeDataFileError(f"{self.path}: refused to load: the pickle uses persistent ids", path=self.path)


def numeric_array(value: object, *, path: str, what: str) -> np.ndarray:
    """Return ``value`` if it is a numpy array of a numeric dtype (no objects, no records).

    Raises:
        DatasetFileError: Anything else, naming ``path`` and ``what``.
    """
    if type(value) is not np.ndarray or value.dtype.kind not in NUMERIC_KINDS:
        kind = f"array of dtype {value.dtype}" if isinstance(value, np.ndarray) else type(value).__name__
        raise DatasetFileError(f"{path}: {what} must be a numeric numpy array, found {kind}", path=path)
    return value


def load_pickle(path: str | os.PathLike[str]) -> Any:
    """Unpickle ``path`` with :class:`AllowListUnpickler`, turning every failure into a typed error.

    Args:
        path (str or Path): The file.

    Returns:
        Any: numpy arrays, :class:`PickledCsr` records, dicts, lists and Python scalars only.

    Raises:
        UnsafeDataFileError: The file names a global outside :data:`ALLOWED_GLOBALS`.
        DatasetFileError: The file cannot be read, or is truncated or corrupt.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            return AllowListUnpickler(f, path=name).load()  # type: ignore[arg-type]
    except UnsafeDataFileError:
        raise
    except Exception as exc:  # only allow-listed code ran; any failure means a bad file
        raise DatasetFileError(
            f"{name}: cannot be read as a pickle ({type(exc).__name__}: {exc}); the file is truncated or "
            f"corrupt, replace it with the original",
            path=name,
        ) from exc


__all__ = ["ALLOWED_GLOBALS", "AllowListUnpickler", "PickledCsr", "load_pickle", "numeric_array"]
