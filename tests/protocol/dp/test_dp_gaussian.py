import math

import pytest
import torch

from securefg.errors import ConfigError, MechanismError
from securefg.federation.envelope import Form
from securefg.protocol.dp.accountant import STATE_KEY, Mode
from securefg.protocol.stack import ProtocolStack

D = 20_000  # coordinates: the sample std of D normals is within 5 / sqrt(2D) = 2.5% of the truth
TOL = 5 / math.sqrt(2 * D)


def _zeros(ex):
    return {c: {"x": torch.zeros(D, dtype=torch.float64)} for c in ex.clients}


def _dp(mode, sigma=0.5, clip=2.0, **extra):
    return {"mode": mode, "noise_multiplier": sigma, "clip": clip, "secure_rng": False, **extra}


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_sum_noise_std_equals_sigma_times_clip(make_stack, make_exchange, mode):
    ex = make_exchange(make_stack(dp_gaussian=_dp(mode)), n=4)
    total = ex.aggregate("u", _zeros(ex), mean=False)["x"]
    assert abs(float(total.std()) / (0.5 * 2.0) - 1) < TOL


def test_distributed_sum_noise_equals_central_noise(make_stack, make_exchange):
    stds = {}
    for mode in ("central", "distributed"):
        ex = make_exchange(make_stack(dp_gaussian=_dp(mode)), n=5, seed=3)
        stds[mode] = float(ex.aggregate("u", _zeros(ex), mean=False)["x"].std())
    assert abs(stds["distributed"] / stds["central"] - 1) < 2 * TOL


def test_local_noise_is_full_noise_on_every_upload(make_stack, make_exchange):
    ex = make_exchange(make_stack(dp_gaussian=_dp("local")), n=4)
    total = ex.aggregate("u", _zeros(ex), mean=False)["x"]
    assert abs(float(total.std()) / (math.sqrt(4) * 0.5 * 2.0) - 1) < TOL
    for c in ex.clients:  # each client recorded its own local release
        (rel,) = ex.parties[c].state[STATE_KEY].releases()
        assert (rel.subject, rel.mode, rel.noise_multiplier, rel.upload_noise_multiplier) == (
            c,
            Mode.LOCAL,
            0.5,
            0.5,
        )
    assert STATE_KEY not in ex.parties["server"].state


def test_clipping_bounds_each_clients_contribution(make_stack, make_exchange):
    ex = make_exchange(make_stack(dp_gaussian=_dp("central", sigma=1e-9, clip=1.0)), n=3)
    big = {
        c: {"x": torch.full((10,), 100.0 * (k + 1), dtype=torch.float64)} for k, c in enumerate(ex.clients)
    }
    total = ex.aggregate("u", big, mean=False)["x"]
    # every input points along the same direction, so the sum of the clipped inputs has norm 3
    assert float(total.norm()) == pytest.approx(3.0, rel=1e-6)
    assert float(big["client/2"]["x"][0]) == 300.0  # the caller's tensors are unchanged


def test_weighted_mean_divides_the_noisy_sum_by_the_weight_total(make_stack, make_exchange):
    ex = make_exchange(make_stack(dp_gaussian=_dp("central", sigma=1e-9, clip=10.0)), n=2)
    xs = {"client/0": {"x": torch.ones(2)}, "client/1": {"x": 3 * torch.ones(2)}}
    out = ex.aggregate("u", xs, weights={"client/0": 1.0, "client/1": 1.0})["x"]
    assert torch.allclose(out.double(), 2 * torch.ones(2, dtype=torch.float64), atol=1e-6)


def test_central_mode_records_each_contributor_on_the_server(make_stack, make_exchange):
    ex = make_exchange(make_stack(dp_gaussian=_dp("central")), n=3)
    for r in range(4):
        ex.round = r
        ex.aggregate("u", _zeros(ex))
    ledger = ex.parties["server"].state[STATE_KEY]
    assert ledger.subjects() == ["client/0", "client/1", "client/2"]
    (rel,) = ledger.releases("client/1")
    assert (rel.mode, rel.noise_multiplier, rel.upload_noise_multiplier, rel.steps) == (
        Mode.CENTRAL,
        0.5,
        0.0,
        4,
    )


def test_distributed_mode_accounts_for_dropouts_and_colluders(make_stack, make_exchange):
    stack = make_stack(dp_gaussian=_dp("distributed", expected_clients=4, colluding=1))
    ex = make_exchange(stack, n=4)
    ex.transport.offline.add("client/3")  # drops before uploading: its noise share is missing
    total = ex.aggregate("u", _zeros(ex), mean=False)["x"]
    assert abs(float(total.std()) / (0.5 * 2.0 * math.sqrt(3 / 4)) - 1) < TOL
    ledger = ex.parties["server"].state[STATE_KEY]
    assert ledger.subjects() == ["client/0", "client/1", "client/2"]
    (rel,) = ledger.releases("client/0")
    # 3 survivors, one of them colluding: 2 honest shares of sigma^2 / 4 each
    assert rel.noise_multiplier == pytest.approx(0.5 * math.sqrt(2 / 4))
    assert rel.upload_noise_multiplier == pytest.approx(0.5 / 2)


def test_local_mode_noises_similarity_vectors(make_stack, make_exchange):
    ex = make_exchange(make_stack(dp_gaussian=_dp("local", sigma=1.0, clip=1.0)), n=3)
    h = {c: torch.ones(D) for c in ex.clients}
    _, sim = ex.similarity("s", h, metric="dot")
    # clipped to norm 1 each, plus N(0, 1) per coordinate: the self-similarity is about 1 + D
    assert float(sim[0, 0]) == pytest.approx(1 + D, rel=0.05)
    assert all(len(ex.parties[c].state[STATE_KEY].releases()) == 1 for c in ex.clients)


def test_central_mode_refuses_an_exchange_without_a_server_step(make_stack, make_exchange):
    ex = make_exchange(make_stack(dp_gaussian=_dp("central")), n=2)
    h = {c: torch.ones(4) for c in ex.clients}
    ex.similarity("s", h)  # the first call cannot be caught: nothing runs after the mechanism
    ex.round = 1
    with pytest.raises(MechanismError, match="server step never ran.*use mode = 'local'"):
        ex.similarity("s", h)


def test_secure_rng_is_the_default_and_draws_fresh_noise(make_stack, make_exchange):
    stack = make_stack(dp_gaussian={"noise_multiplier": 1.0, "clip": 1.0})
    outs = []
    for _ in range(2):
        ex = make_exchange(stack, n=2, seed=0)  # same seed: seeded noise would repeat
        outs.append(ex.aggregate("u", {c: {"x": torch.zeros(16)} for c in ex.clients}, mean=False)["x"])
    assert not torch.equal(outs[0], outs[1])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"clip": 1.0}, "'noise_multiplier' is required"),
        ({"noise_multiplier": 1.0, "clip": -1.0}, "'clip' must be a finite number > 0"),
        ({"noise_multiplier": 1.0, "clip": 1.0, "mode": "shuffled"}, "mode 'shuffled' is not one of"),
        ({"noise_multiplier": 1.0, "clip": 1.0, "sample_rate": 1.5}, r"'sample_rate' must be in \(0, 1\]"),
        ({"noise_multiplier": 1.0, "clip": 1.0, "colluding": -1}, "'colluding' must be an integer >= 0"),
    ],
)
def test_invalid_parameters_are_rejected_with_the_reason(make_stack, make_exchange, params, message):
    ex = make_exchange(make_stack(dp_gaussian=params), n=2)
    with pytest.raises(ConfigError, match=message):
        ex.aggregate("u", {c: {"x": torch.zeros(2)} for c in ex.clients})


def test_unknown_parameter_is_rejected_when_the_stack_is_loaded(make_stack):
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['sigma'\] for transform 'dp_gaussian'"):
        make_stack(dp_gaussian={"sigma": 1.0, "clip": 1.0})


def test_distributed_noise_through_the_real_secure_sum_equals_central_noise(make_exchange):
    stack = ProtocolStack.from_dict(
        {
            "name": "dp-secure-sum",
            "tags": {
                "u": {
                    "mechanism": "secure_sum",
                    "params": {"bits": 64, "clip": 1e3, "signatures": False},
                    "transforms": [{"name": "dp_gaussian", **_dp("distributed")}],
                    "unsafe": "seeded DP noise: deterministic test",
                }
            },
        }
    )
    ex = make_exchange(stack, n=4)
    total = ex.aggregate("u", _zeros(ex), mean=False)["x"]
    assert abs(float(total.std()) / (0.5 * 2.0) - 1) < TOL
    # the server saw the noisy vectors only masked: each client's one upload, and keys
    seen = [r for r in ex.transport.transcript.view("server") if r.tag == "u"]
    assert sorted(r.sender for r in seen if r.form is Form.MASKED) == ex.clients
    assert {r.form for r in seen} == {Form.MASKED, Form.KEYS}
