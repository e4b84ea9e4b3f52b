"""CeFGC's generator cache: hit on the same key, miss on a changed one, typed error when corrupt."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from securefg.data.synthetic import make_graph_classification
from securefg.errors import GeneratorCacheError
from securefg.experiment_data import degree_features, max_degree
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.cefgc.generator_cache import GeneratorCache, cache_key
from securefg.methods.cefgc.package import Architecture
from securefg.methods.tasks import GraphTask
from securefg.methods.training import TrainConfig
from securefg.models.graph_score import EDPScoreConfig
from securefg.models.graph_score.model import DEFAULT_SIGMAS
from securefg.protocol.stack import ProtocolStack

FAST = {"diffusion_epochs": 2, "langevin_steps": 2, "gnn_epochs": 2, "max_nodes": 16, "synthetic_ratio": 0.5}
OPTIONS = {"diffusion_epochs": 150, "diffusion_patience": 0, "diffusion_lr": 1e-3, "diffusion_batch": 32, "max_nodes": 16,
           "common_neighbors": False}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _graphs(seed: int = 0) -> list:
    return make_graph_classification(num_graphs=30, num_classes=2, max_nodes=12, seed=seed)


def _arch(**kw: Any) -> Architecture:
    base = {"config": EDPScoreConfig(), "sigmas": DEFAULT_SIGMAS, "max_node_num": 16, "num_classes": 2, "conditional": False}
    return Architecture(**{**base, **kw})


def _key(graphs=None, arch=None, **kw: Any) -> str:
    base = {"client": 0, "seed": 0, "init_seed": 7, "options": OPTIONS, "device_type": "cpu"}
    return cache_key(graphs if graphs is not None else _graphs(), arch or _arch(), **{**base, **kw})


def test_key_changes_with_everything_training_depends_on() -> None:
    key = _key()
    assert key == _key() and len(key) == 20
    changed = [
        _key(graphs=_graphs(seed=1)), _key(client=1), _key(seed=1), _key(init_seed=8), _key(device_type="cuda"),
        _key(options={**OPTIONS, "diffusion_epochs": 151}), _key(options={**OPTIONS, "common_neighbors": True}),
        _key(arch=_arch(sigmas=(0.1, 0.2))), _key(arch=_arch(conditional=True)), _key(arch=_arch(num_classes=3)),
        _key(arch=_arch(config=dataclasses.replace(EDPScoreConfig(), node_features=4))),
    ]
    assert key not in changed and len(set(changed)) == len(changed)
    # Langevin settings are applied after loading, so they do not split the cache
    assert _key(options={**OPTIONS, "langevin_steps": 5, "step_ratio": 0.3}) == key


def _stored(tmp_path: Path) -> tuple[GeneratorCache, str, dict]:
    cache = GeneratorCache(tmp_path)
    arch = _arch()
    models = {c: arch.new_model(class_label=c, init_seed=3) for c in (0, 1)}
    cache.store(0, "k" * 20, models, {"train_seconds": 1.5})
    return cache, "k" * 20, models


def test_store_then_load_is_exact_and_a_missing_entry_is_a_miss(tmp_path: Path) -> None:
    cache, key, models = _stored(tmp_path)
    assert cache.load(0, "x" * 20) is None and cache.load(1, key) is None
    loaded, report = cache.load(0, key)
    assert report["train_seconds"] == 1.5 and len(report["sha256"]) == 64
    assert [m.class_label for m in loaded] == [0, 1]
    for m in loaded:
        assert torch.equal(m.flat_parameters(), models[m.class_label].flat_parameters())
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete_models", "bad_report", "no_digest"])
def test_a_corrupt_entry_raises_a_typed_error_naming_the_files(tmp_path: Path, damage: str) -> None:
    cache, key, _ = _stored(tmp_path)
    models_path = cache.path(0, key)
    report_path = models_path.with_suffix(".json")
    blob = bytearray(models_path.read_bytes())
    if damage == "flip":
        blob[len(blob) // 2] ^= 0x01  # still decodes: only the digest can tell
        models_path.write_bytes(bytes(blob))
    elif damage == "truncate":
        models_path.write_bytes(bytes(blob[:100]))
    elif damage == "delete_models":
        models_path.unlink()
    elif damage == "bad_report":
        report_path.write_text("{not json")
    else:
        report_path.write_text(json.dumps({"train_seconds": 1.0}))
    with pytest.raises(GeneratorCacheError, match=f"delete {models_path}"):
        cache.load(0, key)


def _task() -> GraphTask:
    graphs = make_graph_classification(num_graphs=60, num_classes=2, max_nodes=12, seed=0)
    cap = min(max_degree(graphs), 8)
    graphs = degree_features(graphs, cap)
    return GraphTask(train=[graphs[k:36:3] for k in range(3)], val=[graphs[36:44]] * 3, test=[graphs[44:52]] * 3,
                     global_test=graphs[52:], num_features=cap + 1, num_classes=2)


def _run(name: str, cache: Path, **options: Any) -> Any:
    config = MethodConfig(rounds=1, train=TrainConfig(lr=1e-3, weight_decay=5e-4), seed=1,
                          options={**FAST, "generator_cache": str(cache), **options})
    method = method_class(name)(_task(), config)
    fed = Federation(3, ProtocolStack.load("plaintext"), seed=1, extra_parties=method.extra_parties)
    RoundRunner(method, fed, rounds=1, progress=False).run()
    return method


def test_runs_hit_miss_and_refuse_a_corrupt_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import securefg.methods.cefgc.method as method_module

    trained: list[int] = []
    real = method_module.train_generators

    def counting(*args: Any, **kwargs: Any) -> Any:
        trained.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(method_module, "train_generators", counting)
    first = _run("cefgc", tmp_path)
    assert len(trained) == 3 and len(list(tmp_path.glob("*.sfgt"))) == 3
    assert not any(c["phase1"]["cached"] for c in first.info["clients"].values())
    # CeFGC+ trains the same generators: a hit for every client
    plus = _run("cefgc_plus", tmp_path)
    assert len(trained) == 3 and all(c["phase1"]["cached"] for c in plus.info["clients"].values())
    assert all("sha256" not in c["phase1"] for c in plus.info["clients"].values())
    # other training epochs: a miss
    _run("cefgc", tmp_path, diffusion_epochs=3)
    assert len(trained) == 6 and len(list(tmp_path.glob("*.sfgt"))) == 6
    # a damaged entry is refused, not retrained over nor used
    path = first._cache_path(0, first.task.train[0])
    blob = bytearray(path.read_bytes())
    blob[-3] ^= 0x10
    path.write_bytes(bytes(blob))
    with pytest.raises(GeneratorCacheError, match="do not match their recorded digest"):
        _run("cefgc", tmp_path)
    assert len(trained) == 6
