"""Side-knowledge baselines: computed from the threat model's grant alone, judged as advantage."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from securefg.attacks.base import attack_class
from securefg.attacks.harness import AttackHarness
from securefg.attacks.link_stealing import pair_similarity
from securefg.attacks.metrics import roc_auc
from securefg.audit.report import AttackEntry
from tests.attacks.conftest import SEED, run_method, threat

OPTIONS = {"variant": "B", "nsf": "hop2vec", "structure_hops": 3, "structure_dim": 16}
LINKS = {"nsf_link": {"pairs": 500}, "link_stealing": {"pairs": 500}, "structure_link": {"pairs": 500}}


class _Sealed:
    """A view that refuses every access: proof that a baseline reads no message of the run."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the baseline touched the run's view ({name})")


@pytest.fixture(scope="module")
def result(node_task: Any) -> dict[str, Any]:
    return run_method(node_task, "fedstruct", "fedstruct_secure", rounds=2, options=OPTIONS, lr=0.01)


def test_link_baselines_are_the_public_features_cosine_and_read_no_message(result, node_task) -> None:
    ctx = AttackHarness(threat(["server"], LINKS, target_features=True), seed=SEED).context(
        result, node_task, stack=result["_stack"])
    for name in ("nsf_link", "link_stealing"):
        attack = attack_class(name)(pairs=500)
        gen = torch.Generator().manual_seed(SEED * 7919 + sum(map(ord, name)))
        challenge = attack.challenge(ctx.truth, ctx.adversary, gen)
        x = node_task.full_graph.x.double()  # every target's features; non-targets never appear in a pair
        expected = roc_auc(challenge.labels, pair_similarity(x, challenge.items, "cosine"))
        sealed = dataclasses.replace(ctx, adversary=dataclasses.replace(ctx.adversary, view=_Sealed()))
        assert attack.run_baseline(sealed) == pytest.approx(expected)
        assert 0.6 < expected < 1.0  # homophilous features: public knowledge alone links nodes


def test_without_side_knowledge_the_baseline_is_chance(result, node_task) -> None:
    ctx = AttackHarness(threat(["server"], LINKS, target_features=False), seed=SEED).context(
        result, node_task, stack=result["_stack"])
    assert attack_class("nsf_link")(pairs=500).run_baseline(ctx) == 0.5


def test_the_verdict_judges_the_advantage_over_the_baseline() -> None:
    assert AttackEntry.verdict(0.8, 0.6, baseline=0.75, chance=0.5) is True  # adds 0.05 <= 0.1
    assert AttackEntry.verdict(0.9, 0.6, baseline=0.75, chance=0.5) is False  # adds 0.15
    assert AttackEntry.verdict(0.7, 0.6, baseline=0.3, chance=0.5) is False  # a baseline below chance counts as chance
    assert AttackEntry.verdict(0.7, 0.6) is False  # no baseline: the absolute value
