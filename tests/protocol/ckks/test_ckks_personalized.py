"""``personalized_aggregate`` under CKKS: client i decrypts exactly sum_j A_ij x_j."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import InvalidInputError, SecretKeyError
from securefg.federation.envelope import Form
from securefg.federation.party import SERVER, client_id
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.secret_context import SecretContext

from .conftest import build_federation, random_inputs, relative_error

C = [client_id(k) for k in range(4)]
A = {
    C[0]: {C[0]: 1.0, C[1]: 0.5, C[2]: 0.0, C[3]: -0.25},
    C[1]: {C[1]: 1.0},
    C[2]: {C[0]: 0.3, C[1]: 0.3, C[2]: 0.3, C[3]: 0.1},
    C[3]: {C[0]: 0.0},  # an all-zero row
}


def _want(inputs: dict[str, dict[str, torch.Tensor]], i: str, name: str) -> torch.Tensor:
    out = torch.zeros_like(inputs[i][name], dtype=torch.float64)
    for j, a in A[i].items():
        out += a * inputs[j][name].double()
    return out


@pytest.mark.parametrize("rerandomize", [False, True])
def test_each_client_gets_its_own_weighted_sum(rerandomize: bool) -> None:
    inputs = random_inputs(4)
    fed = build_federation(4, {"t": {"mechanism": "ckks", "params": {"rerandomize": rerandomize}}})
    got = fed.exchange.personalized_aggregate("t", inputs, A)
    plain = build_federation(4, {"t": {"mechanism": "plaintext"}}).exchange.personalized_aggregate("t", inputs, A)
    for i in C[:3]:
        for name in ("w", "b"):
            assert relative_error(got[i][name], _want(inputs, i, name)) < 1e-6
            assert relative_error(got[i][name], plain[i][name]) < 1e-6
    assert float(got[C[3]]["w"].abs().max()) < 1e-6


def test_server_never_receives_the_secret_context_and_receivers_get_it_sealed() -> None:
    fed = build_federation(4, {"t": {"mechanism": "ckks"}})
    fed.exchange.personalized_aggregate("t", random_inputs(4, size=10), A)
    server_stages = {(r.stage, r.form) for r in fed.transcript.view(SERVER)}
    assert server_stages == {(Stage.PUBLIC_CONTEXT, Form.KEYS), (Stage.UPLOAD, Form.CIPHERTEXT)}
    sealed = [r for r in fed.transcript if r.stage == Stage.SECRET_CONTEXT]
    assert sorted(r.receiver for r in sealed) == C[1:]  # client/0 generated the key
    assert all(r.sender == C[0] and r.form is Form.KEYS for r in sealed)
    for r in sealed:  # the sealed box does not contain the serialized secret key in the clear
        assert r.payload is not None and b"SEAL" not in r.payload[:64]
    for c in C:
        assert any(isinstance(v, SecretContext) for v in fed.parties[c].state["mech/ckks"]["keys"].values())


def test_results_go_out_as_ciphertexts() -> None:
    fed = build_federation(4, {"t": {"mechanism": "ckks"}})
    fed.exchange.personalized_aggregate("t", random_inputs(4, size=10), A)
    results = [r for r in fed.transcript if r.stage == Stage.PERSONALIZED_RESULT]
    assert sorted(r.receiver for r in results) == C and all(r.form is Form.CIPHERTEXT for r in results)


def test_coefficient_naming_an_unknown_sender_is_refused() -> None:
    fed = build_federation(2, {"t": {"mechanism": "ckks"}})
    with pytest.raises(InvalidInputError, match=r"names 'client/9', which sent no input"):
        fed.exchange.personalized_aggregate("t", random_inputs(2, size=10), {C[0]: {client_id(9): 1.0}})


def test_an_encrypt_only_client_cannot_decrypt() -> None:
    fed = build_federation(3, {"t": {"mechanism": "ckks"}})
    fed.exchange.personalized_aggregate("t", random_inputs(3, size=10), {C[1]: {C[2]: 1.0}})
    (ctx,) = fed.parties[C[2]].state["mech/ckks"]["keys"].values()  # client/2 only sent
    assert ctx.is_public()
    with pytest.raises(SecretKeyError, match="cannot decrypt"):
        ctx.decrypt(ctx.encrypt(torch.ones(3, dtype=torch.float64)))


@pytest.mark.parametrize("chain", [[60, 40, 40, 60], [60, 40, 60]])
def test_mixes_skip_the_rescale_and_stay_exact(chain: list[int]) -> None:
    """The mix is computed at scale Delta^2 without rescaling: it keeps the upload's level, the
    server's context keeps rescaling for other circuits, and the values are exact at CKKS noise,
    also with the three-prime chain FED-PUB's weights use (the least integer headroom)."""
    params = {"poly_modulus_degree": 8192, "coeff_mod_bit_sizes": chain, "scale_bits": 40}
    inputs = random_inputs(4, seed=5)
    fed = build_federation(4, {"t": {"mechanism": "ckks", "params": params}})
    got = fed.exchange.personalized_aggregate("t", inputs, A)
    for i in C[:3]:
        assert relative_error(got[i]["w"], _want(inputs, i, "w")) < 1e-7
    results = [r for r in fed.transcript if r.stage == Stage.PERSONALIZED_RESULT]
    uploads = [r for r in fed.transcript if r.stage == Stage.UPLOAD]
    # same level as a fresh upload (serialisation is compressed, so sizes differ slightly; a rescaled
    # result would have one prime fewer: 2/3 or 1/2 of the bytes)
    assert min(r.payload_bytes for r in results) > 0.97 * max(r.payload_bytes for r in uploads)
    server_ctx = next(iter(fed.parties[SERVER].state["mech/ckks"]["keys"].values()))
    assert server_ctx._ctx.auto_rescale  # restored after the mix
