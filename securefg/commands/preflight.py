"""Checks of a run's arguments that need neither torch nor PyG, done before either is imported.

Why: importing torch, PyG, TenSEAL and Opacus takes 5-10 s, and a run used to find an unknown
method, a partition of the wrong kind or a dataset missing from the data root only after that.
These checks answer in well under a second, with the same typed errors the run would raise
later (:class:`~securefg.errors.ConfigError`, :class:`~securefg.errors.DatasetNotFoundError`).
Nothing here replaces the run's own validation; it only comes first.
"""

from __future__ import annotations

import concurrent.futures
import socket

from securefg.data.catalog import get_spec
from securefg.data.root import is_offline, missing_raw_files, not_found_error, resolve_root, work_root
from securefg.errors import ConfigError
from securefg.methods.method_card import method_card
from securefg.run_config import (
    GRAPH_PARTITIONS,
    NODE_PARTITIONS,
    SYNTHETIC_GRAPH,
    SYNTHETIC_NODE,
    RunConfig,
    dataset_kind,
    dataset_names,
)
from securefg.toml_files import protocols_dir, read_named_toml, threat_models_dir

#: The host PyG downloads each loader family from (the ``url`` of its dataset class).
DOWNLOAD_HOSTS: dict[str, str] = {
    "planetoid": "github.com",
    "amazon": "github.com",
    "coauthor": "github.com",
    "wikipedia": "raw.githubusercontent.com",
    "actor": "raw.githubusercontent.com",
    "heterophilous": "github.com",
    "tu": "www.chrsmrrs.com",
}
#: Seconds to wait for a download host's name to resolve before letting PyG try anyway.
RESOLVE_TIMEOUT_S = 1.5


def check_partition(partition: str | None, kind: str, dataset: str) -> None:
    """Refuse a ``--partition`` that is unknown or made for the other kind of dataset.

    Raises:
        ConfigError: Naming the choices for ``dataset``'s kind.
    """
    if partition is None:
        return
    own, other = (NODE_PARTITIONS, GRAPH_PARTITIONS) if kind == "node" else (GRAPH_PARTITIONS, NODE_PARTITIONS)
    if partition.lower() in own:
        return
    why = f"is for {'graph' if kind == 'node' else 'node'} datasets" if partition.lower() in other else "is unknown"
    raise ConfigError(f"--partition {partition!r} {why}; {dataset} is a {kind} classification dataset: choose one "
                      f"of {list(own)}")


def check_data_present(dataset: str, data_root: str | None) -> None:
    """Refuse, at once, a dataset whose raw files are missing and cannot be downloaded.

    A file counts as present in the data root or in the writable copy an earlier download made
    (as :func:`securefg.data.root.prepare` counts it). Missing files with ``SECUREFG_OFFLINE=1``,
    or when the download host's name does not resolve, raise the loader's own error now.

    Raises:
        DatasetNotFoundError: Naming the folder, the files and how to point at the data.
    """
    for name in dataset_names(dataset):
        if name.lower() in SYNTHETIC_NODE | SYNTHETIC_GRAPH:
            continue
        spec = get_spec(name)
        root = resolve_root(data_root)
        copy = work_root(root) / spec.raw_dir
        missing = [f for f in missing_raw_files(spec, root) if not (copy / f).is_file()]
        if not missing:
            continue
        if is_offline():
            raise not_found_error(spec, root, missing)
        host = DOWNLOAD_HOSTS.get(spec.family)
        problem = _unresolvable(host) if host else None
        if problem is not None:
            raise not_found_error(spec, root, missing, cause=problem)


def _unresolvable(host: str) -> OSError | None:
    """The error resolving ``host`` raised, or ``None`` when it resolved (or took too long to tell)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(socket.getaddrinfo, host, 443).result(timeout=RESOLVE_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        return None  # a slow resolver: let PyG try, as it would have
    except OSError as exc:
        return OSError(f"cannot resolve {host} to download from it: {exc}")
    finally:
        pool.shutdown(wait=False)
    return None


def check_run(cfg: RunConfig, *, threat_model: str | None = None) -> None:
    """Every check above for one run, in the order a user would fix them.

    Raises:
        ConfigError: Unknown method, dataset, partition, stack or threat model, or a method that
            does not do the dataset's task.
        DatasetNotFoundError: The dataset's files are missing and cannot be fetched.
    """
    card = method_card(cfg.method)
    kind = dataset_kind(cfg.dataset)
    if kind not in card.tasks:
        raise ConfigError(f"method {card.name!r} does {' and '.join(card.tasks)} classification; {cfg.dataset} is a "
                          f"{kind} classification dataset")
    check_partition(cfg.partition, kind, cfg.dataset)
    if cfg.protocol is not None:
        read_named_toml(cfg.protocol, protocols_dir(), "protocol stack")
    if threat_model is not None:
        read_named_toml(threat_model, threat_models_dir(), "threat model")
    check_data_present(cfg.dataset, cfg.data_root)


__all__ = ["DOWNLOAD_HOSTS", "check_data_present", "check_partition", "check_run"]
