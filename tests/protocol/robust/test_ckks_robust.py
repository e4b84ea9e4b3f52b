"""ckks_robust: the kept inputs' exact mean, ciphertext-only uploads, the key holder's checks, refusals."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from securefg.errors import (
    CodecError,
    ConfigError,
    ImplausibleSumError,
    InvalidInputError,
    OverflowRiskError,
    ProtocolError,
)
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Form
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.presets import resolve_preset
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.relay.blob_list import pack_blobs
from securefg.protocol.robust.ckks_robust import (
    NAME,
    Stage,
    Upload,
    encrypt_upload,
    gram_request,
    judge,
    parse_upload,
    read_coefficients,
    read_magnitude,
    release_checked_sum,
    selected_sum,
    sketch_of,
    split_magnitude,
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


def _judged(n: int = 5, seed: int = 2) -> tuple[Any, list[Upload], Any, torch.Tensor, OutputNoise]:
    preset = resolve_preset({"preset": "default"})
    secret = SecretContext.generate(preset)
    server = secret.public_context(galois=True)
    g = torch.Generator().manual_seed(seed)
    vecs = [torch.randn(300, generator=g, dtype=torch.float64) * 10.0 ** (k - 2) for k in range(n)]  # norms 0.17 .. 1700
    ups = [parse_upload(server, encrypt_upload(server, torch.cat([v, torch.ones(1)]), tail=1, preset=preset,
                                               pid=f"client/{k}"), length=301, tail=1) for k, v in enumerate(vecs)]
    reply, expect = judge(secret, gram_request(ups), n=n, tail=1, weighted=True, rule="norm", trim=0.2, norm_factor=1e9)
    return secret, ups, expect, read_coefficients(reply, n), OutputNoise("none", flood_std=2.0**-20, round_bits=20)


def test_updates_of_any_magnitude_give_the_exact_gram_matrix_and_sum() -> None:
    """Each upload carries its own power of two: norms over four orders of magnitude, no scale to tune."""
    secret, ups, expect, coeffs, noise = _judged()
    assert torch.equal(coeffs, torch.ones(5, dtype=torch.float64))
    out = decode_tensor(release_checked_sum(secret, selected_sum(ups, coeffs, weighted=True), expect, noise, length=301,
                                            tail=1), spec=TensorSpec({"x": (torch.float64, (301,))}))
    g = torch.Generator().manual_seed(2)
    want = sum(torch.randn(300, generator=g, dtype=torch.float64) * 10.0 ** (k - 2) for k in range(5))
    # CKKS error relative to the largest update's norm (1700 here): about 1e-7
    assert float((out[:300] - want).abs().max()) < 1e-6 * 1700 and float(out[300]) == pytest.approx(5.0)


def test_a_sum_the_key_holder_did_not_expect_is_refused() -> None:
    """A server that sends one client's ciphertext (or a tampered sum) instead of the kept sum."""
    secret, ups, expect, _, noise = _judged()
    one = pack_blobs([(ups[4].values * 1.0).to_bytes(), ups[4].sketch.times_encrypted(ups[4].magnitude).to_bytes(),
                      ups[4].tail.to_bytes()])  # type: ignore[union-attr]
    with pytest.raises(ImplausibleSumError, match="squared norm"):
        release_checked_sum(secret, one, expect, noise, length=301, tail=1)
    with pytest.raises(CodecError):
        judge(secret, gram_request(ups[:4]), n=5, tail=1, weighted=True, rule="krum", trim=0.2, norm_factor=0.0)


def test_a_magnitude_that_is_not_one_power_of_two_is_refused() -> None:
    assert read_magnitude(torch.full((8,), 4.0)) == 4.0
    for bad in (torch.full((8,), 3.0), torch.tensor([4.0, 4.0, 8.0, 4.0]), torch.full((8,), -2.0)):
        with pytest.raises(InvalidInputError):
            read_magnitude(bad)
    assert split_magnitude(torch.zeros(3))[0] == 1.0
    s, u = split_magnitude(torch.full((4,), 3.0))
    assert s == 8.0 and 0.5 < float(u.norm()) <= 1.0


def test_a_value_too_large_for_the_sum_is_refused() -> None:
    preset = resolve_preset({"preset": "default"})
    secret = SecretContext.generate(preset)
    with pytest.raises(OverflowRiskError, match="exceeds"):
        encrypt_upload(secret, torch.full((100,), 1e17, dtype=torch.float64), tail=0, preset=preset, pid="client/0")


@pytest.mark.parametrize("payload", [encode_tensor(torch.tensor([1.0, 2.0, 0.0])), encode_tensor(torch.zeros(3)),
                                     encode_tensor(torch.tensor([1.0, float("nan"), 1.0])), encode_tensor(torch.ones(4))])
def test_bad_coefficients_from_the_key_holder_are_refused(payload: bytes) -> None:
    with pytest.raises((ProtocolError, CodecError)):
        read_coefficients(payload, 3)


@pytest.mark.parametrize(("params", "match"), [({"rule": "median"}, "rule must be one of"),
                                               ({"rule": "norm"}, "needs norm_factor > 0"),
                                               ({"trim": 0.5}, "trim must be"),
                                               ({"key_holder": "server"}, "cannot be the server")])
def test_bad_parameters_are_refused(params: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProtocolStack.from_dict({"name": "t", "tags": binding(**params)})


def test_a_stack_with_it_asks_for_a_key_holder_party() -> None:
    stack = ProtocolStack.load("fedavg_robust")
    assert stack.helper_parties() == ("keyholder",)
    assert ProtocolStack.load("fedavg_ckks").helper_parties() == ()


def test_the_krum_option_keeps_masked_sums_masked_and_encrypted_sums_encrypted() -> None:
    from securefg.methods.base import method_class
    from securefg.protocol.robust.options import apply_robust_option

    secure = ProtocolStack.load("fedavg_secure_sum")
    stack = apply_robust_option(secure, method_class("fedavg"), {"robust": "krum"})
    assert stack.name == "fedavg_secure_sum+robust-krum" and stack.helper_parties() == ("keyholder",)
    b = stack.binding_for(TAG)
    assert b.mechanism == "masked_robust" and b.params["inner_params"] == {
        k: v for k, v in secure.binding_for(TAG).params.items()}  # the tag's own SecAgg+ parameters
    assert stack.binding_for("fedavg/metrics").mechanism == "secure_sum"
    normed = apply_robust_option(secure, method_class("fedavg"), {"robust": "krum", "robust_norm": 2.0})
    assert normed.binding_for(TAG).mechanism == NAME and normed.binding_for(TAG).params["norm_factor"] == 2.0
    ckks = apply_robust_option(ProtocolStack.load("fedavg_ckks"), method_class("fedavg"), {"robust": "krum"})
    assert ckks.binding_for(TAG).mechanism == NAME and ckks.binding_for(TAG).params["norm_factor"] == 0.0
    fs = apply_robust_option(ProtocolStack.load("fedstruct_secure"), method_class("fedstruct"), {"robust": "krum"})
    assert fs.binding_for("fedstruct/update").mechanism == "masked_robust"
    assert fs.binding_for("fedstruct/nsf_grad").mechanism == "blind_robust"  # ∇S stays server-blind
    nf = apply_robust_option(secure, method_class("fedavg"), {"robust": "norm_filter"})
    assert nf.name == "fedavg_secure_sum+robust-normfilter3" and nf.binding_for(TAG).params["rule"] == "norm_filter"
    assert nf.binding_for(TAG).mechanism == "masked_robust" and nf.binding_for(TAG).params["norm_factor"] == 3.0
    with pytest.raises(ConfigError, match="must be > 0"):
        apply_robust_option(secure, method_class("fedavg"), {"robust": "norm_filter", "robust_norm": 0})
    with pytest.raises(ConfigError, match="robust_k"):
        apply_robust_option(ProtocolStack.load("fedavg_secure_sum"), method_class("fedavg"),
                            {"robust": "krum", "robust_k": 2})


def test_a_shared_sum_sends_every_client_the_robust_aggregate() -> None:
    fed = build_federation(6, {"fedstruct/nsf_grad": {"mechanism": NAME, "params": {}}}, extra=["keyholder"])
    xs = honest_and_flipped(fed.clients, seed=3)
    got = fed.exchange.shared_sum("fedstruct/nsf_grad", xs)
    rel = fed.parties["server"].state[f"mech/{NAME}"]["released"][("fedstruct/nsf_grad", fed.exchange.round)]
    assert rel.coefficients["client/4"] == 0 and len(rel.kept) == 5  # n = 6: f = 1 (n >= 2f + 3)
    values = [v["w"] for v in got.values()]
    assert len(values) == 6 and all(torch.equal(values[0], v) for v in values)
    # an unweighted sum: the kept inputs' sum scaled to all six (an estimate of the full sum)
    assert torch.allclose(values[0], sum(xs[c]["w"] for c in rel.kept) * 6 / 5, atol=1e-4)


def test_an_upload_not_split_as_the_protocol_splits_it_is_dropped_not_trusted() -> None:
    """A malicious client that sends its boosted update as the 'unit' part with magnitude 1."""
    preset = resolve_preset({"preset": "default"})
    secret = SecretContext.generate(preset)
    server = secret.public_context(galois=True)
    g = torch.Generator().manual_seed(4)
    base = torch.randn(200, generator=g, dtype=torch.float64)
    vecs = [base + 0.1 * torch.randn(200, generator=g, dtype=torch.float64) for _ in range(6)]
    ups = [parse_upload(server, encrypt_upload(server, v, tail=0, preset=preset, pid=f"client/{k}"), length=200, tail=0)
           for k, v in enumerate(vecs)]
    crafted = pack_blobs([server.encrypt(-10 * vecs[0]).to_bytes(), server.encrypt(-10 * vecs[0]).to_bytes(),
                          server.encrypt(torch.ones(preset.slots, dtype=torch.float64)).to_bytes()])
    ups[0] = parse_upload(server, crafted, length=200, tail=0)
    reply, _ = judge(secret, gram_request(ups), n=6, tail=0, weighted=False, rule="norm", trim=0.2, norm_factor=1e9)
    coeffs = read_coefficients(reply, 6)
    assert coeffs[0] == 0 and bool((coeffs[1:] == 1).all())


def test_a_long_update_is_judged_on_its_count_sketch_and_a_lying_sketch_is_caught() -> None:
    """Past one ciphertext of values, the rule sees count sketches (inner products within a few
    percent of the norms' product); a kept client whose sketch is not its update's fails the check."""
    preset = resolve_preset({"preset": "default"})
    secret = SecretContext.generate(preset)
    server = secret.public_context(galois=True)
    g = torch.Generator().manual_seed(5)
    length = 3 * preset.slots + 17
    vecs = [torch.randn(length, generator=g, dtype=torch.float64) for _ in range(4)]
    true = torch.stack(vecs) @ torch.stack(vecs).T
    sk = torch.stack([sketch_of(v, preset.slots) for v in vecs])
    assert float(((sk @ sk.T) - true).abs().max()) < 0.1 * float(torch.diagonal(true).max())
    ups = [parse_upload(server, encrypt_upload(server, v, tail=0, preset=preset, pid=f"client/{k}"), length=length,
                        tail=0) for k, v in enumerate(vecs)]
    reply, expect = judge(secret, gram_request(ups), n=4, tail=0, weighted=False, rule="norm", trim=0.2,
                          norm_factor=1e9)
    coeffs = read_coefficients(reply, 4)
    noise = OutputNoise("none", flood_std=2.0**-20, round_bits=20)
    out = decode_tensor(release_checked_sum(secret, selected_sum(ups, coeffs, weighted=False), expect, noise,
                                            length=length, tail=0), spec=TensorSpec({"x": (torch.float64, (length,))}))
    assert torch.allclose(out, sum(vecs), atol=1e-5)
    # client 3 uploads a poisoned update with client 2's (honest-looking) sketch
    s2, unit2 = split_magnitude(sketch_of(vecs[2], preset.slots))
    liar = pack_blobs([server.encrypt(-10 * vecs[3]).to_bytes(), server.encrypt(unit2).to_bytes(),
                       server.encrypt(torch.full((preset.slots,), s2, dtype=torch.float64)).to_bytes()])
    ups[3] = parse_upload(server, liar, length=length, tail=0)
    reply, expect = judge(secret, gram_request(ups), n=4, tail=0, weighted=False, rule="norm", trim=0.2,
                          norm_factor=1e9)
    with pytest.raises(ImplausibleSumError, match="not the sum of the kept sketches"):
        release_checked_sum(secret, selected_sum(ups, read_coefficients(reply, 4), weighted=False), expect, noise,
                            length=length, tail=0)
