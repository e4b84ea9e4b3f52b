"""subgroup_robust: exact subgroup sums under SecAgg+, a server view of subgroup sums only, refusals."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from securefg.errors import ConfigError, SubgroupTooSmallError
from securefg.federation.envelope import Form
from securefg.methods.base import method_class
from securefg.protocol.robust.options import apply_robust_option
from securefg.protocol.robust.rules import coordinate_median, row_norms_bounded
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.stack import ProtocolStack
from tests.protocol.federation_fixture import build_federation

SECURE = {"bits": 64, "clip": 1024.0, "on_clip": "error", "signatures": False}
TAG = "fedavg/update"


def robust_binding(rule: str = "median", k: int = 3, inner: str = "secure_sum", **extra: Any) -> dict[str, Any]:
    params = {"inner": inner, "inner_params": SECURE if inner == "secure_sum" else {}, "rule": rule, "k": k, **extra}
    return {TAG: {"mechanism": "subgroup_robust", "params": params}}


def inputs_for(clients: list[str], length: int = 6, seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return {c: {"w": torch.randn(length, generator=g, dtype=torch.float64)} for c in clients}


def released(fed: Any) -> Any:
    rel = fed.parties["server"].state["mech/subgroup_robust"]["released"]
    return rel[(TAG, fed.exchange.round)]


def test_subgroup_sums_equal_the_plaintext_subgroup_sums() -> None:
    fed = build_federation(10, robust_binding(k=3))
    xs = inputs_for(fed.clients)
    weights = {c: float(i + 1) for i, c in enumerate(fed.clients)}
    fed.exchange.aggregate(TAG, xs, weights=weights)
    rel = released(fed)
    assert len(rel.groups) == 3 and rel.weighted and rel.count_tail == 1
    for members, total in zip(rel.contributors, rel.sums):
        plain = sum(xs[c]["w"] * weights[c] for c in members)
        assert torch.allclose(total[:-1], plain, atol=1e-6)
        assert total[-1].item() == pytest.approx(sum(weights[c] for c in members))


@pytest.mark.parametrize("norm_factor", [0.0, 1.0])
def test_the_result_is_the_median_of_the_norm_bounded_subgroup_means(norm_factor: float) -> None:
    fed = build_federation(10, robust_binding(k=2, norm_factor=norm_factor))
    xs = inputs_for(fed.clients, seed=1)
    out = fed.exchange.aggregate(TAG, xs)["w"]
    rel = released(fed)
    means = torch.stack([torch.stack([xs[c]["w"] for c in g]).mean(0) for g in rel.groups])
    assert len(rel.groups) == 5
    assert torch.allclose(out, coordinate_median(row_norms_bounded(means, norm_factor)), atol=1e-6)


def test_one_boosted_client_cannot_drag_the_median_result() -> None:
    fed = build_federation(10, robust_binding(k=2))
    xs = {c: {"w": torch.ones(4, dtype=torch.float64)} for c in fed.clients}
    xs["client/0"] = {"w": torch.full((4,), -500.0, dtype=torch.float64)}
    out = fed.exchange.aggregate(TAG, xs)["w"]
    assert torch.allclose(out, torch.ones(4, dtype=torch.float64), atol=1e-6)


def test_the_servers_view_holds_no_single_clients_update() -> None:
    fed = build_federation(9, robust_binding(k=3))
    xs = inputs_for(fed.clients, seed=2)
    fed.exchange.aggregate(TAG, xs, mean=False)
    to_server = [r for r in fed.transcript if r.tag == TAG and r.receiver == "server"]
    assert to_server and {r.form for r in to_server} <= {Form.MASKED, Form.KEYS}
    rel = released(fed)
    assert min(len(g) for g in rel.contributors) >= 3
    for total in rel.sums:  # what the server learned: sums of >= 3 inputs, none equal to one input
        assert not any(torch.allclose(total, x["w"], atol=1e-3) for x in xs.values())


def test_a_subgroup_left_with_fewer_than_k_survivors_is_refused() -> None:
    fed = build_federation(8, robust_binding(k=4))
    xs = inputs_for(fed.clients)
    fed.exchange.dropouts = {Stage.MASKED_INPUT.value: frozenset({"client/0"})}
    with pytest.raises(SubgroupTooSmallError, match="fewer than k=4"):
        fed.exchange.aggregate(TAG, xs, mean=False)


def test_fewer_clients_than_k_are_refused() -> None:
    fed = build_federation(2, robust_binding(k=3))
    with pytest.raises(SubgroupTooSmallError, match="2 clients cannot form a subgroup of k=3"):
        fed.exchange.aggregate(TAG, inputs_for(fed.clients), mean=False)


@pytest.mark.parametrize("params, message", [
    ({"k": 1}, "k must be an integer >= 2"),
    ({"rule": "mode"}, "rule must be one of"),
    ({"inner": "plaintext_trimmed_mean"}, "must carry 'aggregate' and return an exact sum"),
    ({"inner_params": {"bits": 64, "nope": 1}}, "inner_params: unknown parameter 'nope'"),
])
def test_stack_validation_refuses_bad_parameters(params: dict[str, Any], message: str) -> None:
    import securefg.attacks.defences  # noqa: F401  (registers plaintext_trimmed_mean)

    binding = robust_binding()
    binding[TAG]["params"].update(params)
    with pytest.raises(ConfigError, match=message):
        ProtocolStack.from_dict({"name": "t", "tags": binding})


def test_robust_option_rebinds_the_update_tag_and_keeps_the_metrics_sum() -> None:
    stack = apply_robust_option(ProtocolStack.load("fedavg_secure_sum"), method_class("fedsgd"),
                                {"robust": "trimmed", "robust_k": 2})
    assert stack.name == "fedavg_secure_sum+robust-trimmed-k2"
    b = stack.binding_for(TAG)
    assert b.mechanism == "subgroup_robust" and b.params["inner"] == "secure_sum" and b.params["k"] == 2
    assert stack.binding_for("fedavg/metrics").mechanism == "secure_sum"
    again = apply_robust_option(stack, method_class("fedavg"), {"robust": "trimmed", "robust_k": 2})
    assert again.binding_for(TAG).params["inner"] == "secure_sum"  # never wrapped twice


def test_robust_option_is_refused_for_a_method_without_an_update_aggregate_or_a_bad_rule() -> None:
    stack = ProtocolStack.load("plaintext")
    with pytest.raises(ConfigError, match="has no update aggregate"):
        apply_robust_option(stack, method_class("fedpub"), {"robust": "median"})
    with pytest.raises(ConfigError, match="must be one of"):
        apply_robust_option(stack, method_class("fedavg"), {"robust": "bogus"})
    with pytest.raises(ConfigError, match="need --option robust"):
        apply_robust_option(stack, method_class("fedavg"), {"robust_k": 2})


def test_a_shared_sum_under_the_robust_option_sends_every_client_the_robust_aggregate() -> None:
    """``shared_sum`` through ``subgroup_robust``: every client receives the same robust
    aggregate, which equals the aggregate call's result (the server runs the rule, so it reads
    the subgroup sums: ``fedstruct/nsf_grad`` gives up blindness under the robust option)."""
    fed = build_federation(9, robust_binding(k=3))
    xs = inputs_for(fed.clients, seed=4)
    xs[fed.clients[0]] = {"w": xs[fed.clients[0]]["w"] * 300.0}  # one outlier (within the clip of 1024)
    got = fed.exchange.shared_sum(TAG, xs)
    assert set(got) == set(fed.clients)
    first = got[fed.clients[0]]["w"]
    assert all(torch.equal(v["w"], first) for v in got.values())
    fed2 = build_federation(9, robust_binding(k=3))
    expected = fed2.exchange.aggregate(TAG, xs, mean=False)["w"]
    assert torch.allclose(first, expected, atol=1e-6)
    assert float(first.abs().max()) < 100  # the outlier's subgroup is outvoted


def test_the_robust_option_sums_fedstructs_blind_gradient_subgroups_with_secure_sum() -> None:
    stack = apply_robust_option(ProtocolStack.load("fedstruct_secure"), method_class("fedstruct"),
                                {"robust": "closest", "robust_k": 2})
    for tag in ("fedstruct/update", "fedstruct/nsf_grad"):
        b = stack.binding_for(tag)
        assert b.mechanism == "subgroup_robust" and b.params["inner"] == "secure_sum", tag
    assert "server-blind" in stack.description
