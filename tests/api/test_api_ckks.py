"""securefg.api's CKKS roles in memory: a sum, a personalized mix, similarities, and what each refuses."""

from __future__ import annotations

import pytest
import torch

from securefg.api import (
    AuthenticationError,
    CKKSClient,
    CKKSConfig,
    CKKSKeyHolder,
    CKKSServer,
    CodecError,
    ConfigError,
    SealingKey,
    SecretKeyError,
)
from securefg.api._wire import frame
from securefg.protocol.ckks.constants import Stage

SESSION = bytes(range(16))
M = 12


@pytest.fixture(scope="module")
def config() -> CKKSConfig:
    return CKKSConfig.from_stack("fedavg_ckks", "fedavg/update")


@pytest.fixture(scope="module")
def holder(config: CKKSConfig) -> CKKSKeyHolder:
    return CKKSKeyHolder(config, pid="client/0", session=SESSION)


def xs(n: int = 4) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    return {f"client/{k}": torch.randn(M, generator=g, dtype=torch.float64) for k in range(n)}


def within_tolerance(got: torch.Tensor, want: torch.Tensor, flood_std: float) -> bool:
    return float((got - want).abs().max()) <= 1e-6 * float(want.abs().max()) + 6 * flood_std


def test_the_released_sum_is_within_tolerance_and_a_malformed_upload_is_left_out(config, holder) -> None:
    x = xs()
    public = holder.public_context()
    uploads = {"client/0": holder.encrypt(x["client/0"])}
    uploads |= {c: CKKSClient(config, public_context=public).encrypt(v) for c, v in x.items() if c != "client/0"}
    uploads["client/3"] = frame(Stage.UPLOAD, b"not a ciphertext")
    server = CKKSServer(config, public_context=public)
    total = server.read_sum(holder.release_sum(server.sum(uploads, length=M), length=M), length=M)
    assert server.contributors == ("client/0", "client/1", "client/2") and set(server.drops) == {"client/3"}
    assert server.is_public()
    assert within_tolerance(total, x["client/0"] + x["client/1"] + x["client/2"], config.params["flood_std"])


def test_the_server_refuses_a_context_that_carries_the_secret_key(config, holder) -> None:
    leaked = frame(Stage.PUBLIC_CONTEXT, holder._secret.secret_bytes())
    with pytest.raises(SecretKeyError, match="carries a secret key"):
        CKKSServer(config, public_context=leaked)


def test_a_personalized_mix_decrypts_only_for_the_client_it_was_sealed_to(config, holder) -> None:
    x = xs(3)
    public = holder.public_context()
    key = SealingKey()
    sealed = holder.seal_secret_context(recipient="client/1", sealing_public_key=key.public_bytes)
    receiver = CKKSClient.from_sealed_secret(config, sealed, pid="client/1", holder="client/0", session=SESSION,
                                             sealing_key=key)
    with pytest.raises(AuthenticationError):
        CKKSClient.from_sealed_secret(config, sealed, pid="client/2", holder="client/0", session=SESSION, sealing_key=key)
    uploads = {c: CKKSClient(config, public_context=public).encrypt(v) for c, v in x.items()}
    a = {"client/1": {"client/0": 0.5, "client/2": -2.0}}
    out = CKKSServer(config, public_context=public).personalized(uploads, a, length=M)
    got = receiver.decrypt(out["client/1"], length=M)
    assert float((got - (0.5 * x["client/0"] - 2.0 * x["client/2"])).abs().max()) < 1e-5
    with pytest.raises(SecretKeyError, match="only the public context"):
        CKKSClient(config, public_context=public).decrypt(out["client/1"], length=M)


def test_the_similarity_matrix_matches_the_plaintext_cosines(config, holder) -> None:
    x = xs(3)
    public = holder.public_context(galois=True)
    server = CKKSServer(config, public_context=public)
    uploads = {c: CKKSClient(config, public_context=public).encrypt_for_similarity(v) for c, v in x.items()}
    order, matrix = server.read_similarity(holder.release_similarity(server.similarity(uploads), clients=3))
    unit = torch.stack([x[c] / x[c].norm() for c in order])
    assert order == sorted(x) and float((matrix - unit @ unit.T).abs().max()) < 1e-4
    with pytest.raises(ConfigError, match="galois=True"):
        CKKSServer(config, public_context=holder.public_context()).similarity(uploads)


def test_messages_of_another_stage_and_unsafe_settings_are_refused(config, holder) -> None:
    with pytest.raises(CodecError, match="expected a 'ckks/decrypt/request' message"):
        holder.release_sum(holder.public_context(), length=M)
    with pytest.raises(ConfigError, match="output_noise"):
        CKKSConfig(output_noise="none")
    assert CKKSConfig(output_noise="none", unsafe="decryptions never reach the server").failed_protections
