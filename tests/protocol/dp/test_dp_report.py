import json

import pytest
import torch

from securefg.protocol.dp.accountant import epsilon_of_history
from securefg.protocol.dp.report import privacy_report


def _run(ex, rounds):
    for r in range(rounds):
        ex.round = r
        ex.aggregate("u", {c: {"x": torch.ones(8)} for c in ex.clients})


def test_report_gives_each_clients_epsilon_for_the_whole_run(make_stack, make_exchange):
    stack = make_stack(dp_gaussian={"noise_multiplier": 1.2, "clip": 1.0, "secure_rng": False})
    ex = make_exchange(stack, n=3)
    _run(ex, 5)
    rep = privacy_report(ex.parties, delta=1e-5, stack=stack, accountants=("rdp", "prv"))
    expected = epsilon_of_history([(1.2, 1.0, 5)], delta=1e-5)
    assert rep["epsilon"] == pytest.approx(expected)
    assert sorted(rep["clients"]) == ["client/0", "client/1", "client/2"]
    entry = rep["clients"]["client/2"]["client"]
    assert entry["epsilon"]["rdp"] == pytest.approx(expected)
    assert entry["epsilon"]["prv"] < entry["epsilon"]["rdp"]  # PRV is the tighter accountant here
    assert entry["epsilon_vs_aggregator"]["rdp"] is None  # central noise: the server saw the sum
    assert (rep["stack"], rep["delta"], rep["accountant"]) == ("dp-test", 1e-5, "rdp")
    json.dumps(rep, allow_nan=False)


@pytest.mark.parametrize(("mechanism", "hidden"), [("plaintext", False), ("test_masked_sum", True)])
def test_distributed_aggregator_view_follows_the_mechanism(make_stack, make_exchange, mechanism, hidden):
    stack = make_stack(
        mechanism,
        dp_gaussian={"mode": "distributed", "noise_multiplier": 1.0, "clip": 1.0, "secure_rng": False},
    )
    ex = make_exchange(stack, n=4)
    _run(ex, 2)
    rep = privacy_report(ex.parties, stack=stack, accountants=("rdp",))
    vs_agg = rep["clients"]["client/0"]["client"]["epsilon_vs_aggregator"]["rdp"]
    sigma_seen = 1.0 if hidden else 1.0 / 2  # the sum's noise, or one share of four
    assert vs_agg == pytest.approx(epsilon_of_history([(sigma_seen, 1.0, 2)], delta=1e-5))
    # without the stack the report cannot know the sum was masked and assumes the worst
    blind = privacy_report(ex.parties, accountants=("rdp",))
    assert blind["clients"]["client/0"]["client"]["epsilon_vs_aggregator"]["rdp"] == pytest.approx(
        epsilon_of_history([(0.5, 1.0, 2)], delta=1e-5)
    )


def test_report_is_empty_when_no_dp_ran(make_stack, make_exchange):
    ex = make_exchange(make_stack(), n=2)
    _run(ex, 1)
    assert privacy_report(ex.parties) == {}


def test_headline_is_null_with_a_note_when_only_example_level_dp_ran(make_stack, make_exchange):
    from securefg.protocol.dp.accountant import STATE_KEY, Mode, PrivacyAccountant, Release, Unit

    ex = make_exchange(make_stack(), n=1)
    acc = ex.parties["client/0"].state.setdefault(STATE_KEY, PrivacyAccountant())
    acc.record(Release("client/0", "local", Mode.DPSGD, 1.0, 1.0, 0.01, 100, unit=Unit.EXAMPLE))
    rep = privacy_report(ex.parties, stack=make_stack(), accountants=("rdp",))  # tag not in the stack
    assert rep["epsilon"] is None and rep["notes"][0].startswith("no client-level DP release")
    assert rep["clients"]["client/0"]["example"]["epsilon"]["rdp"] == pytest.approx(
        epsilon_of_history([(1.0, 0.01, 100)], delta=1e-5)
    )
