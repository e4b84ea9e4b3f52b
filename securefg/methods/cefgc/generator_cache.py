"""A client's phase-1 generators kept on disk, so reruns and other variants skip training.

Phase 1 is offline and reusable in the paper; this is where a client keeps its result. An
entry is two files named by a key of everything training depends on:

* ``client{k}-{key}.sfgt``: the trained models (exact package, :func:`pack_exact`);
* ``client{k}-{key}.json``: the phase-1 report and the SHA-256 of the ``.sfgt`` bytes.

The ``.json`` is written last (both files via a temporary name and :func:`os.replace`), so it
marks a complete entry: a run killed mid-write leaves no entry and trains again. An entry that
exists but does not read back as written (missing models, bad digest, undecodable bytes) raises
:class:`~securefg.errors.GeneratorCacheError`: it is never silently retrained over, nor used.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch_geometric.data import Data

from securefg.errors import CodecError, GeneratorCacheError
from securefg.federation.codec import decode_tensors, encode_tensors
from securefg.methods.cefgc.package import Architecture, pack_exact, unpack_exact
from securefg.models.graph_score import GraphDiffusionModel

#: Bump when phase-1 training changes in a way the key below does not see.
CACHE_VERSION = "phase1-v3"
#: CeFGC options that change a trained generator (the Langevin settings do not: applied after loading).
TRAINING_OPTIONS = ("diffusion_epochs", "diffusion_patience", "diffusion_lr", "diffusion_batch", "max_nodes",
                    "common_neighbors", "dp_epsilon", "dp_delta", "dp_max_grad_norm")


def cache_key(
    graphs: Sequence[Data],
    arch: Architecture,
    *,
    client: int,
    seed: int,
    init_seed: int,
    options: Mapping[str, Any],
    device_type: str,
) -> str:
    """A 20-hex-digit key of everything one client's phase-1 training depends on.

    The graphs enter through their structure and labels only (EDP-GNN never reads node
    features); the architecture through its score-network sizes, noise levels, node cap, label
    space and conditioning; the device type because CPU and CUDA kernels round differently.
    """
    h = hashlib.sha256()
    for g in graphs:
        h.update(g.edge_index.cpu().numpy().tobytes())
        h.update(int(g.num_nodes).to_bytes(4, "little"))
        h.update(int(g.y.view(-1)[0]).to_bytes(4, "little"))
    arch_fields = {"config": dataclasses.asdict(arch.config), "sigmas": list(arch.sigmas),
                   "max_node_num": arch.max_node_num, "num_classes": arch.num_classes, "conditional": arch.conditional}
    h.update(json.dumps([CACHE_VERSION, arch_fields, init_seed, seed, client, device_type,
                         *(options.get(x) for x in TRAINING_OPTIONS)], sort_keys=True, default=str).encode())
    return h.hexdigest()[:20]


class GeneratorCache:
    """One folder of cached phase-1 generators (any clients, seeds and settings).

    Args:
        root (str | Path): The folder; created on the first store.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"GeneratorCache({str(self.root)!r})"

    def path(self, client: int, key: str) -> Path:
        """The models file of one entry (its report sits beside it with suffix ``.json``)."""
        return self.root / f"client{client}-{key}.sfgt"

    def load(self, client: int, key: str) -> tuple[list[GraphDiffusionModel], dict[str, Any]] | None:
        """The cached models and phase-1 report, or ``None`` when there is no entry.

        Raises:
            GeneratorCacheError: The entry is incomplete or corrupt (the message names the
                files to delete so that the next run trains again).
        """
        models_path = self.path(client, key)
        report_path = models_path.with_suffix(".json")
        if not report_path.is_file():
            return None
        fix = f"delete {models_path} and {report_path} to train this client's generators again"
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise GeneratorCacheError(f"generator cache report {report_path} is unreadable ({exc}); {fix}") from exc
        if not isinstance(report, dict) or not isinstance(report.get("sha256"), str):
            raise GeneratorCacheError(f"generator cache report {report_path} has no models digest; {fix}")
        try:
            blob = models_path.read_bytes()
        except OSError as exc:
            raise GeneratorCacheError(f"generator cache models {models_path} are missing or unreadable ({exc}); {fix}") from exc
        if hashlib.sha256(blob).hexdigest() != report["sha256"]:
            raise GeneratorCacheError(f"generator cache models {models_path} do not match their recorded digest; {fix}")
        try:
            models = unpack_exact(decode_tensors(blob))
        except (CodecError, KeyError, ValueError) as exc:
            raise GeneratorCacheError(f"generator cache models {models_path} do not decode ({exc}); {fix}") from exc
        return models, report

    def store(self, client: int, key: str, models: Mapping[int, GraphDiffusionModel], report: Mapping[str, Any]) -> None:
        """Write one entry: models first, then the report with their digest (the commit mark)."""
        models_path = self.path(client, key)
        self.root.mkdir(parents=True, exist_ok=True)
        blob = encode_tensors(pack_exact(dict(models)))
        _write_atomic(models_path, blob)
        record = {**report, "sha256": hashlib.sha256(blob).hexdigest()}
        _write_atomic(models_path.with_suffix(".json"), json.dumps(record).encode("utf-8"))


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


__all__ = ["CACHE_VERSION", "TRAINING_OPTIONS", "GeneratorCache", "cache_key"]
