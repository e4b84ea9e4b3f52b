"""Where datasets are read from, and the writable copy PyG processes.

The shared dataset folder is read-only (and shared between runs), but PyG writes ``processed/``
next to ``raw/`` on first load. So every load goes through :func:`prepare`: it copies the raw
folder into a private work directory and PyG reads and writes only there. Raw files are never
downloaded when ``SECUREFG_OFFLINE=1``; otherwise PyG may try, and a failure becomes a
:class:`~securefg.errors.DatasetNotFoundError` that names the folder and files to provide.
Runs that load one dataset at the same time take turns (:func:`dataset_lock`), so none reads
another's half-written ``processed/`` file.

Environment variables:

* ``SECUREFG_DATA``: data root when no ``root`` argument is given.
* ``SECUREFG_CACHE``: where the writable copies go (default ``~/.cache/securefg/work``).
* ``SECUREFG_OFFLINE``: ``1`` forbids download attempts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from securefg.data.catalog import DatasetSpec, get_spec
from securefg.errors import DatasetFileError, DatasetNotFoundError, SecureFGError, UnsafeDataFileError
from securefg.file_lock import exclusive_lock

ENV_DATA = "SECUREFG_DATA"
ENV_CACHE = "SECUREFG_CACHE"
ENV_OFFLINE = "SECUREFG_OFFLINE"

T = TypeVar("T")


def _user_cache() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "securefg"


def resolve_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Return the data root: explicit ``root`` > ``$SECUREFG_DATA`` > ``~/.cache/securefg/datasets``.

    Args:
        root (str or Path, optional): Explicit root folder holding ``<Name>/raw``.
            (default: :obj:`None`)
    """
    if root is not None:
        return Path(root).expanduser().resolve()
    env = os.environ.get(ENV_DATA)
    if env:
        return Path(env).expanduser().resolve()
    return (_user_cache() / "datasets").resolve()


def cache_root() -> Path:
    """Return the writable work directory: ``$SECUREFG_CACHE`` or ``~/.cache/securefg/work``."""
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser().resolve() if env else (_user_cache() / "work").resolve()


def is_offline() -> bool:
    """Whether ``SECUREFG_OFFLINE=1`` forbids PyG from downloading missing raw files."""
    return os.environ.get(ENV_OFFLINE, "").strip() == "1"


def missing_raw_files(spec: DatasetSpec, root: Path) -> list[str]:
    """Return the raw files of ``spec`` that are absent under ``root`` (empty if complete)."""
    raw = root / spec.raw_dir
    return [f for f in spec.raw_files if not (raw / f).is_file()]


def work_root(root: Path) -> Path:
    """Return the private work directory that mirrors ``root``.

    It is keyed by a hash of ``root``'s absolute path, so two data roots holding different
    files under the same dataset name never share processed files.
    """
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return cache_root() / digest


def not_found_error(
    spec: DatasetSpec, root: Path, missing: list[str], *, cause: BaseException | None = None
) -> DatasetNotFoundError:
    """Build the error for missing raw files, naming the folder and every expected file."""
    raw = root / spec.raw_dir
    lines = [
        f"Dataset {spec.name!r} is not available: missing raw files in {raw}: {', '.join(missing)}.",
        f"Expected folder {raw} with files: {', '.join(spec.raw_files)}.",
        (f"Put the raw files there (PyG layout), or point the data root at a folder that has them: "
         f"`--data-root DIR` on the command line, `export {ENV_DATA}=DIR`, or `root=DIR` in Python."),
    ]
    if cause is not None:
        lines.append(f"PyG could not download them either ({type(cause).__name__}: {cause}).")
    else:
        lines.append(f"Downloads are disabled ({ENV_OFFLINE}=1).")
    return DatasetNotFoundError("\n".join(lines))


def _sync_dir(src: Path, dst: Path) -> bool:
    """Copy the regular files of ``src`` into ``dst``; return whether anything changed."""
    if not src.is_dir():
        return False
    dst.mkdir(parents=True, exist_ok=True)
    changed = False
    for f in sorted(src.iterdir()):
        if not f.is_file():
            continue
        stat = f.stat()
        target = dst / f.name
        if target.is_file():
            tstat = target.stat()
            if tstat.st_size == stat.st_size and tstat.st_mtime_ns == stat.st_mtime_ns:
                continue
        # Copy to a temporary name and rename, so a concurrent loader never sees half a file.
        tmp = dst / f".{f.name}.{os.getpid()}.tmp"
        shutil.copyfile(f, tmp)  # content only: the copy stays writable even if src is 0444
        os.utime(tmp, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        os.replace(tmp, target)
        changed = True
    return changed


def prepare(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Copy a dataset's raw folder into the work directory and return the root to give PyG.

    The shared root is only read. If the raw files changed since the last copy, the stale
    ``processed/`` folder of the copy is deleted so PyG processes the new files. Files that PyG
    downloaded into the copy earlier count as present, so an offline run can reuse them.

    Args:
        name (str): Dataset name (case-insensitive).
        root (str or Path, optional): Data root; see :func:`resolve_root`. (default: :obj:`None`)

    Returns:
        Path: A writable root laid out like the source root (``<work>/<Name>/raw/...``).

    Raises:
        DatasetNotFoundError: Raw files are missing and ``SECUREFG_OFFLINE=1``.
        ConfigError: Unknown dataset name.
    """
    spec = get_spec(name)
    src_root = resolve_root(root)
    work = work_root(src_root)
    dst_raw = work / spec.raw_dir
    if _sync_dir(src_root / spec.raw_dir, dst_raw):
        shutil.rmtree(dst_raw.parent / "processed", ignore_errors=True)
    # A file absent from the source may still be in the copy from an earlier online download.
    missing = [f for f in missing_raw_files(spec, src_root) if not (dst_raw / f).is_file()]
    if missing and is_offline():
        raise not_found_error(spec, src_root, missing)
    work.mkdir(parents=True, exist_ok=True)
    (work / "SOURCE.txt").write_text(f"{src_root}\n")  # for humans browsing the cache
    return work


@contextlib.contextmanager
def dataset_lock(work: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock on one dataset's work copy while it is prepared and processed.

    PyG writes ``processed/`` in place, so two runs that load the same dataset for the first
    time at once could read each other's half-written file. The lock makes the second wait
    and then read the finished file. The lock file lives next to the copy and stays there.
    """
    work.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(work / f".{name}.lock"):
        yield


def unreadable_error(spec: DatasetSpec, root: Path, exc: Exception) -> DatasetFileError:
    """Build the error for complete raw files that PyG could not parse, naming the file if known."""
    raw = root / spec.raw_dir
    where = getattr(exc, "filename", None) or f"a file in {raw}"
    first = str(exc).splitlines()[0] if str(exc) else ""
    if "allow_pickle" in first:  # numpy refused an object array inside an .npz
        return UnsafeDataFileError(
            f"Dataset {spec.name!r}: refused {where}: it holds pickled objects (nothing was run); "
            f"replace it with the original", path=str(where),
        )
    return DatasetFileError(
        f"Dataset {spec.name!r}: could not read {where} ({type(exc).__name__}: {first}); a raw file is "
        f"truncated or corrupt: replace it with the original ({', '.join(spec.raw_files)})",
        path=str(where),
    )


def open_with_pyg(name: str, root: str | os.PathLike[str] | None, *, build: Callable[[Path], T]) -> T:
    """Prepare the work copy, then let ``build(work_root)`` construct the PyG dataset.

    If raw files were missing, PyG tries to download them; any failure of that attempt is
    raised as :class:`~securefg.errors.DatasetNotFoundError` naming the expected files. With
    complete raw files, a failure to parse them (a truncated file, say) is raised as
    :class:`~securefg.errors.DatasetFileError`. Processed files are read with
    ``weights_only=True`` only (:mod:`securefg.data.safe_processed`).

    Args:
        name (str): Dataset name.
        root (str or Path, optional): Data root; see :func:`resolve_root`.
        build (Callable[[Path], T]): Constructs the PyG dataset from the work root.

    Raises:
        DatasetNotFoundError: Raw files missing and not downloadable.
        UnsafeDataFileError: A raw or processed file names code outside the readers' allow-lists.
        DatasetFileError: A raw or processed file is truncated or corrupt.
    """
    from securefg.data.safe_processed import check_processed, strict_pyg_loads  # torch: only when loading

    spec = get_spec(name)
    src_root = resolve_root(root)
    with dataset_lock(work_root(src_root), spec.name):
        work = prepare(spec.name, src_root)
        missing = [f for f in missing_raw_files(spec, src_root) if not (work / spec.raw_dir / f).is_file()]
        check_processed((work / spec.raw_dir).parent / "processed")
        try:
            with strict_pyg_loads():
                return build(work)
        except DatasetFileError as exc:  # name the file in the data root, not in the work copy
            copy, source = str(work / spec.raw_dir), str(src_root / spec.raw_dir)
            path = exc.path.replace(copy, source) if exc.path else None
            raise type(exc)(str(exc).replace(copy, source), path=path) from exc
        except SecureFGError:
            raise
        except Exception as exc:  # PyG raises URLError, OSError, fsspec or aiohttp errors; parsers ValueError, ...
            if missing:
                raise not_found_error(spec, src_root, missing, cause=exc) from exc
            raise unreadable_error(spec, src_root, exc) from exc
