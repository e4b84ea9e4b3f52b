import json
import math

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.protocol.dp.accountant import Mode, PrivacyAccountant, Release, Unit, epsilon_of_history

# Opacus' own reference (opacus/tests/accountants_test.py, test_rdp_accountant): sigma=1.5,
# q=0.04, int(90 / 0.04) = 2250 steps, delta=1e-5 -> 7.32911117143.
OPACUS_RDP_EPSILON = 7.32911117143

# microsoft/prv_accountant values at delta=1e-6, as pinned in opacus/tests/prv_accountant.py.
MSR_PRV_EPSILON = {
    (1.5, 0.05, 1000): 6.20996924657726712126759593957,
    (2.0, 0.2, 100): 5.67205560882372950004537415225,
    (0.8, 0.001, 100): 0.270403364058018680360362395731,
}


def _central(subject="client/0", tag="t", sigma=1.5, q=0.04, steps=1):
    return Release(subject, tag, Mode.CENTRAL, sigma, 0.0, q, steps)


def test_rdp_epsilon_reproduces_opacus_reference_value_step_by_step():
    acc = PrivacyAccountant()
    for _ in range(2250):
        acc.record(_central())
    assert len(acc.releases()) == 1 and acc.releases()[0].steps == 2250  # merged like Opacus' history
    assert acc.epsilon("client/0", delta=1e-5) == pytest.approx(OPACUS_RDP_EPSILON, abs=1e-7)


@pytest.mark.parametrize(("key", "expected"), sorted(MSR_PRV_EPSILON.items()))
def test_prv_epsilon_reproduces_microsoft_prv_accountant(key, expected):
    sigma, q, steps = key
    acc = PrivacyAccountant()
    acc.record(_central(sigma=sigma, q=q, steps=steps))
    assert acc.epsilon("client/0", delta=1e-6, accountant="prv") == pytest.approx(expected, abs=1e-5)


def test_interleaved_releases_of_the_same_kind_are_merged():
    acc = PrivacyAccountant()
    for _ in range(3):
        acc.record(_central(tag="a"))
        acc.record(_central(tag="b"))
    assert [(r.tag, r.steps) for r in acc.releases()] == [("a", 3), ("b", 3)]


def test_releases_on_different_tags_compose_for_the_same_client():
    acc = PrivacyAccountant()
    acc.record(_central(tag="a", sigma=1.0, q=1.0, steps=10))
    acc.record(_central(tag="b", sigma=2.0, q=0.1, steps=100))
    acc.record(_central(subject="client/1", tag="a", sigma=1.0, q=1.0, steps=10))
    both = epsilon_of_history([(1.0, 1.0, 10), (2.0, 0.1, 100)], delta=1e-5)
    assert acc.epsilon("client/0", delta=1e-5) == pytest.approx(both)
    assert acc.epsilon("client/1", delta=1e-5) < both  # a client is charged only for its own releases


def test_units_are_accounted_separately():
    acc = PrivacyAccountant()
    acc.record(_central(sigma=1.0, q=1.0, steps=5))
    acc.record(Release("client/0", "dpsgd", Mode.DPSGD, 1.0, 1.0, 0.01, 500, unit=Unit.EXAMPLE))
    client = acc.epsilon("client/0", delta=1e-5)
    example = acc.epsilon("client/0", delta=1e-5, unit=Unit.EXAMPLE)
    assert client == pytest.approx(epsilon_of_history([(1.0, 1.0, 5)], delta=1e-5))
    assert example == pytest.approx(epsilon_of_history([(1.0, 0.01, 500)], delta=1e-5))


def test_aggregator_view_depends_on_mode_and_on_whether_inputs_are_hidden():
    acc = PrivacyAccountant()
    acc.record(Release("client/0", "c", Mode.CENTRAL, 1.0, 0.0))
    acc.record(Release("client/1", "d", Mode.DISTRIBUTED, 1.0, 0.5))
    # central: the aggregator saw the exact sum, hidden or not
    assert acc.epsilon("client/0", delta=1e-5, view="aggregator") == math.inf
    assert acc.epsilon("client/0", delta=1e-5, view="aggregator", hidden_tags={"c"}) == math.inf
    # distributed: over plaintext it sees the share (sigma/2), under a masked sum the full sum noise
    out = acc.epsilon("client/1", delta=1e-5)
    assert acc.epsilon("client/1", delta=1e-5, view="aggregator", hidden_tags={"d"}) == pytest.approx(out)
    share = acc.epsilon("client/1", delta=1e-5, view="aggregator")
    assert share == pytest.approx(epsilon_of_history([(0.5, 1.0, 1)], delta=1e-5)) and share > out


def test_report_uses_null_for_unbounded_and_is_strict_json():
    acc = PrivacyAccountant()
    acc.record(Release("client/0", "c", Mode.CENTRAL, 1.0, 0.0, steps=3))
    rep = acc.report(delta=1e-5)
    entry = rep["subjects"]["client/0"]["client"]
    assert entry["epsilon"]["rdp"] == pytest.approx(epsilon_of_history([(1.0, 1.0, 3)], delta=1e-5))
    assert entry["epsilon_vs_aggregator"] == {"rdp": None}
    json.dumps(rep, allow_nan=False)


def test_state_dict_round_trips_through_json():
    acc = PrivacyAccountant()
    acc.record(_central(steps=7))
    acc.record(Release("client/0", "d", Mode.DPSGD, 1.1, 1.1, 0.02, 30, unit=Unit.EXAMPLE))
    back = PrivacyAccountant()
    back.load_state_dict(json.loads(json.dumps(acc.state_dict())))
    assert back.releases() == acc.releases()


def test_state_dict_survives_a_weights_only_torch_checkpoint(tmp_path):
    acc = PrivacyAccountant()
    acc.record(_central(steps=4))
    torch.save({"mech/dp": acc.state_dict()}, tmp_path / "ckpt.pt")
    back = PrivacyAccountant()
    back.load_state_dict(torch.load(tmp_path / "ckpt.pt", weights_only=True)["mech/dp"])
    assert back.releases() == acc.releases()


def test_combined_merges_every_partys_ledger():
    a, b = PrivacyAccountant(), PrivacyAccountant()
    a.record(_central(steps=2))
    b.record(_central(steps=3))
    (rel,) = PrivacyAccountant.combined([a, b]).releases()
    assert rel.steps == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"noise_multiplier": -1.0}, "noise_multiplier must be finite and >= 0"),
        ({"sample_rate": 0.0}, r"sample_rate must be in \(0, 1\]"),
        ({"steps": 0}, "steps must be >= 1"),
    ],
)
def test_invalid_release_is_rejected(kwargs, message):
    base = {
        "subject": "client/0",
        "tag": "t",
        "mode": Mode.CENTRAL,
        "noise_multiplier": 1.0,
        "upload_noise_multiplier": 0.0,
    }
    with pytest.raises(InvalidInputError, match=message):
        Release(**{**base, **kwargs})


def test_delta_outside_unit_interval_is_rejected():
    with pytest.raises(InvalidInputError, match=r"delta must be in \(0, 1\)"):
        epsilon_of_history([(1.0, 1.0, 1)], delta=0.0)
