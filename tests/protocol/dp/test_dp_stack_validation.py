import pytest
import torch

from securefg.errors import ConfigError
from securefg.methods.fedavg import FedAvg
from securefg.protocol.mechanism import mechanism_class
from securefg.protocol.stack import ProtocolStack


def _masked_mechanisms():
    names = ["test_masked_sum"]  # registered by conftest, stands in until a real one exists
    try:
        mechanism_class("secure_sum")
        names.append("secure_sum")
    except ConfigError:
        pass
    return names


@pytest.mark.parametrize("mechanism", _masked_mechanisms())
def test_stack_rejects_robust_aggregation_over_a_masked_sum(make_stack, mechanism):
    assert not mechanism_class(mechanism).reveals_individual_inputs
    with pytest.raises(ConfigError, match="robust aggregation over a masked sum is impossible"):
        make_stack(mechanism, robust_aggregation={"method": "median"})


def test_robust_aggregation_over_plaintext_explains_why_it_cannot_run(make_stack, make_exchange):
    ex = make_exchange(make_stack(robust_aggregation={}), n=2)  # the stack itself loads
    with pytest.raises(ConfigError, match="server half would see only.*'plaintext_trimmed_mean'"):
        ex.aggregate("u", {c: {"x": torch.ones(2)} for c in ex.clients})


def test_norm_bounding_is_allowed_over_a_masked_sum_and_bounds_inputs(make_stack, make_exchange):
    ex = make_exchange(make_stack("test_masked_sum", clip_norm={"clip": 1.0}), n=2)
    total = ex.aggregate("u", {c: {"x": torch.full((4,), 10.0)} for c in ex.clients}, mean=False)["x"]
    assert float(total.norm()) == pytest.approx(2.0)


def test_clip_norm_needs_a_positive_clip(make_stack, make_exchange):
    ex = make_exchange(make_stack(clip_norm={}), n=2)
    with pytest.raises(ConfigError, match="'clip_norm' needs 'clip', a finite number > 0"):
        ex.aggregate("u", {c: {"x": torch.ones(2)} for c in ex.clients})


def test_shipped_fedavg_dp_stack_binds_every_fedavg_tag_explicitly():
    stack = ProtocolStack.load("fedavg_dp")
    stack.check_tags(FedAvg.TAGS)
    assert sorted(b.pattern for b in stack.bindings) == sorted(FedAvg.TAGS)  # no "*" fallback
    (dp,) = stack.resolve("fedavg/update", FedAvg.TAGS["fedavg/update"]).transforms
    assert (dp.name, dp.mode.value, dp.params["secure_rng"]) == ("dp_gaussian", "central", True)
    assert stack.resolve("fedavg/metrics", FedAvg.TAGS["fedavg/metrics"]).transforms == ()
