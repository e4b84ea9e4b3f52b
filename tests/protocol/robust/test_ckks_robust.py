"""ckks_robust: the kept inputs' exact mean, ciphertext-only uploads, the key holder's checks, refusals."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from securefg.errors import CodecError, ConfigError, ImplausibleSumError, OverflowRiskError, ProtocolError
from securefg.federation.codec import encode_tensor
from securefg.federation.envelope import Form
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.presets import resolve_preset
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.relay.blob_list import pack_blobs
from securefg.protocol.robust.ckks_robust import (
    NAME,
    Stage,
    encrypt_upload,
    gram_request,
    judge,
    parse_upload,
    read_coefficients,
    release_checked_sum,
    selected_sum,
)
from securefg.protocol.stack import ProtocolStack
from tests.protocol.federation_fixture import build_federation

TAG = "fedavg/update"
SIZE = 5000  # two CKKS chunks at N = 8192


def binding(**params: Any) -> dict[str, Any]:
    return {TAG: {"mechanism": NAME, "params": params}}


def honest_and_flipped(clients: list[str], seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(SIZE, generator=g, dtype=torch.float64)
    xs = {c: {"w": base + 0.3 * torch.randn(SIZE, generator=g, dtype=torch.float64)} for c in clients}
    xs[clients[4]] = {"w": -10 * xs[clients[4]]["w"]}
    return xs


def released(fed: Any) -> Any:
    return fed.parties["server"].state[f"mech/{NAME}"]["released"][(TAG, fed.exchange.round)]


def test_the_result_is_the_weighted_mean_of_the_kept_inputs_and_the_flipped_one_is_dropped() -> None:
    fed = build_federation(10, binding(), extra=["keyholder"])
    xs = honest_and_flipped(fed.clients)
    weights = {c: float(3 + 7 * i) for i, c in enumerate(fed.clients)}  # 3 .. 66: the rule sees unweighted updates
    out = fed.exchange.aggregate(TAG, xs, weights=weights)["w"]
    rel = released(fed)
    kept = rel.kept
    assert rel.coefficients["client/4"] == 0 and len(kept) == 8
    want = sum(xs[c]["w"] * weights[c] for c in kept) / sum(weights[c] for c in kept)
    assert torch.allclose(out, want, atol=1e-5)
    assert tuple(fed.exchange.last_contributors) == kept


def test_the_server_and_the_key_holder_see_ciphertexts_and_released_results_only() -> None:
    fed = build_federation(6, binding(), extra=["keyholder"])
    xs = honest_and_flipped(fed.clients, seed=1)
    fed.exchange.aggregate(TAG, xs)
    recs = [r for r in fed.transcript if r.tag == TAG]
    to_server = {(r.stage, r.form) for r in recs if r.receiver == "server"}
    assert to_server == {(Stage.UPLOAD, Form.CIPHERTEXT), (Stage.GRAM_RESULT, Form.AGGREGATE),
                         (Stage.SUM_RESULT, Form.AGGREGATE), ("ckks/keys/public", Form.KEYS)}
    to_holder = {(r.stage, r.form) for r in recs if r.receiver == "keyholder"}
    assert to_holder == {(Stage.GRAM_REQUEST, Form.CIPHERTEXT), (Stage.SUM_REQUEST, Form.CIPHERTEXT)}
    assert not any(r.sender.startswith("client/") and r.receiver == "keyholder" for r in recs)


def test_a_sum_key_holder_did_not_expect_is_refused() -> None:
    """A server that sends one client's ciphertext (or a tampered sum) instead of the kept sum."""
    preset = resolve_preset({"preset": "default"})
    secret = SecretContext.generate(preset)
    server = secret.public_context(galois=True)
    g = torch.Generator().manual_seed(2)
    vecs = [torch.randn(300, generator=g, dtype=torch.float64) for _ in range(5)]
    ups = [parse_upload(server, encrypt_upload(server, torch.cat([v, torch.ones(1)]), tail=1, scale=4.0, preset=preset,
                                               pid=f"client/{k}"), length=301, tail=1) for k, v in enumerate(vecs)]
    values, tails = [u[0] for u in ups], [u[1] for u in ups]
    reply, expect = judge(secret, gram_request(values, tails), n=5, tail=1, weighted=True, rule="krum", trim=0.2,
                          norm_factor=0.0, scale=4.0)
    coeffs = read_coefficients(reply, 5)
    noise = OutputNoise("none", flood_std=2.0**-20, round_bits=20)
    honest = release_checked_sum(secret, selected_sum(values, tails, coeffs, 4.0), expect, noise, length=301, tail=1)
    assert honest
    one = pack_blobs([values[0].to_bytes(), tails[0].to_bytes()])  # type: ignore[union-attr]
    with pytest.raises(ImplausibleSumError, match="squared norm"):
        release_checked_sum(secret, one, expect, noise, length=301, tail=1)
    with pytest.raises(CodecError):
        judge(secret, gram_request(values[:4], tails[:4]), n=5, tail=1, weighted=True, rule="krum", trim=0.2,
              norm_factor=0.0, scale=4.0)


def test_an_update_too_large_for_the_scale_is_refused_naming_the_scale_to_use() -> None:
    preset = resolve_preset({"preset": "default"})
    secret = SecretContext.generate(preset)
    big = torch.full((100,), 1e4, dtype=torch.float64)
    with pytest.raises(OverflowRiskError, match="set the ckks_robust scale to at least"):
        encrypt_upload(secret, big, tail=0, scale=64.0, preset=preset, pid="client/0")


@pytest.mark.parametrize("payload", [encode_tensor(torch.tensor([1.0, 2.0, 0.0])), encode_tensor(torch.zeros(3)),
                                     encode_tensor(torch.tensor([1.0, float("nan"), 1.0])), encode_tensor(torch.ones(4))])
def test_bad_coefficients_from_the_key_holder_are_refused(payload: bytes) -> None:
    with pytest.raises((ProtocolError, CodecError)):
        read_coefficients(payload, 3)


@pytest.mark.parametrize(("params", "match"), [({"rule": "median"}, "rule must be one of"),
                                               ({"rule": "norm"}, "needs norm_factor > 0"),
                                               ({"scale": 0.0}, "scale must be"),
                                               ({"trim": 0.5}, "trim must be"),
                                               ({"key_holder": "server"}, "cannot be the server")])
def test_bad_parameters_are_refused(params: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProtocolStack.from_dict({"name": "t", "tags": binding(**params)})


def test_a_stack_with_it_asks_for_a_key_holder_party() -> None:
    stack = ProtocolStack.load("fedavg_robust")
    assert stack.helper_parties() == ("keyholder",)
    assert ProtocolStack.load("fedavg_ckks").helper_parties() == ()


def test_the_krum_option_binds_the_update_aggregates_to_ckks_robust() -> None:
    from securefg.methods.base import method_class
    from securefg.protocol.robust.options import apply_robust_option

    stack = apply_robust_option(ProtocolStack.load("fedavg_secure_sum"), method_class("fedavg"), {"robust": "krum"})
    assert stack.name == "fedavg_secure_sum+robust-krum" and stack.helper_parties() == ("keyholder",)
    assert stack.binding_for(TAG).mechanism == NAME and stack.binding_for(TAG).params["norm_factor"] == 0.0
    assert stack.binding_for("fedavg/metrics").mechanism == "secure_sum"
    fs = apply_robust_option(ProtocolStack.load("fedstruct_secure"), method_class("fedstruct"), {"robust": "krum"})
    assert fs.binding_for("fedstruct/update").mechanism == NAME
    assert fs.binding_for("fedstruct/nsf_grad").mechanism == "blind_sum"  # a shared_sum keeps its mechanism
    with pytest.raises(ConfigError, match="robust_k"):
        apply_robust_option(ProtocolStack.load("fedavg_secure_sum"), method_class("fedavg"),
                            {"robust": "krum", "robust_k": 2})
