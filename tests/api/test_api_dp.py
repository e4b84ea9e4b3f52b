"""securefg.api's dp_gaussian halves and accountant, alone and composed with the secure sum."""

from __future__ import annotations

import math

import pytest
import torch

from securefg.api import (
    ConfigError,
    DPGaussianNoise,
    DPMode,
    PrivacyAccountant,
    Release,
    SecureSumClient,
    SecureSumConfig,
    SecureSumServer,
)


def test_central_noise_is_added_once_by_the_server_and_accounted_per_contributor() -> None:
    dp = DPGaussianNoise(mode="central", noise_multiplier=1.0, clip=1.0)
    x = torch.full((1000,), 1.0, dtype=torch.float64)
    clipped = dp.client(x, pid="client/0", tag="u")
    assert float(clipped.norm()) == pytest.approx(1.0) and float(x[0]) == 1.0  # clipped copy, input unchanged
    ledger = PrivacyAccountant()
    noisy = dp.server(torch.zeros(1000, dtype=torch.float64), contributors=["client/0", "client/1"], tag="u",
                      accountant=ledger)
    assert float(noisy.std()) == pytest.approx(1.0, rel=0.1)
    reference = PrivacyAccountant()
    reference.record(Release("client/0", "u", DPMode.CENTRAL, 1.0, 0.0))
    assert ledger.subjects() == ["client/0", "client/1"]
    assert ledger.epsilon("client/0", delta=1e-5) == pytest.approx(reference.epsilon("client/0", delta=1e-5))


def test_distributed_noise_shares_add_up_to_the_central_noise_under_a_secure_sum() -> None:
    n, m = 4, 2000
    dp = DPGaussianNoise(mode="distributed", noise_multiplier=2.0, clip=1.0, expected_clients=n)
    config = SecureSumConfig(clip=50.0, resolution=1e-6)
    session = bytes(16)
    ids = [f"c{k}" for k in range(n)]
    clients = {c: SecureSumClient(config, pid=c, vector=dp.client(torch.zeros(m, dtype=torch.float64), pid=c, tag="u"),
                                  session=session, round=0, tag="u") for c in ids}
    server = SecureSumServer(config, clients=ids, length=m, session=session, round=0, tag="u")
    out = server.start()
    while not server.done:
        out = server.receive({c: clients[c].handle(msg) for c, msg in out.items()})
    assert server.result is not None
    ledger = PrivacyAccountant()
    total = dp.server(server.result.total, contributors=server.result.contributors, tag="u", accountant=ledger)
    assert float(total.std()) == pytest.approx(2.0, rel=0.1)  # sigma * clip over all n shares
    assert math.isfinite(ledger.epsilon("c0", delta=1e-5)) and len(ledger) == n


def test_local_noise_is_recorded_by_the_client_and_configs_come_from_stacks() -> None:
    dp = DPGaussianNoise(mode="local", noise_multiplier=1.0, clip=1.0)
    own = PrivacyAccountant()
    dp.client(torch.ones(3, dtype=torch.float64), pid="client/3", tag="h", accountant=own)
    assert own.subjects() == ["client/3"] and own.releases()[0].mode is DPMode.LOCAL
    shipped = DPGaussianNoise.from_stack("fedavg_dp", "fedavg/update")
    assert shipped.mode in ("central", "distributed", "local")
    with pytest.raises(ConfigError, match="no dp_gaussian transform"):
        DPGaussianNoise.from_stack("fedavg_secure_sum", "fedavg/update")
    with pytest.raises(ConfigError, match="expected_clients >= 1"):
        DPGaussianNoise(mode="distributed", noise_multiplier=1.0, clip=1.0)
    with pytest.raises(ConfigError, match="sample_rate"):
        DPGaussianNoise(mode="central", noise_multiplier=1.0, clip=1.0, sample_rate=0.5)
