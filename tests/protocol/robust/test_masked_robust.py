"""masked_robust: the kept inputs' mean by SecAgg+, sketches only under CKKS, the checks, refusals."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from securefg.errors import ConfigError, ImplausibleSumError, ProtocolError
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Form
from securefg.protocol.ckks.presets import resolve_preset
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.robust import ckks_robust as cr
from securefg.protocol.robust.masked_robust import (
    NAME,
    Stage,
    check_masked_sum,
    release_sketch_sum,
    sketch_sum_request,
)
from securefg.protocol.stack import ProtocolStack
from tests.protocol.federation_fixture import build_federation
from tests.protocol.robust.test_ckks_robust import SIZE, honest_and_flipped

TAG = "fedavg/update"


def binding(**params: Any) -> dict[str, Any]:
    return {TAG: {"mechanism": NAME, "params": params}}


def released(fed: Any, tag: str = TAG) -> Any:
    return fed.parties["server"].state[f"mech/{NAME}"]["released"][(tag, fed.exchange.round)]


def test_the_result_is_the_weighted_mean_of_the_kept_inputs_and_the_flipped_one_is_dropped() -> None:
    fed = build_federation(10, binding(), extra=["keyholder"])
    xs = honest_and_flipped(fed.clients)
    weights = {c: float(3 + 7 * i) for i, c in enumerate(fed.clients)}
    out = fed.exchange.aggregate(TAG, xs, weights=weights)["w"]
    rel = released(fed)
    assert rel.coefficients["client/4"] == 0 and len(rel.kept) == 8
    want = sum(xs[c]["w"] * weights[c] for c in rel.kept) / sum(weights[c] for c in rel.kept)
    assert torch.allclose(out, want, atol=1e-6)
    assert tuple(fed.exchange.last_contributors) == rel.kept


def test_no_update_travels_under_ckks_and_a_dropped_client_never_sends_a_masked_input() -> None:
    fed = build_federation(6, binding(), extra=["keyholder"])
    xs = honest_and_flipped(fed.clients, seed=1)
    fed.exchange.aggregate(TAG, xs)
    recs = [r for r in fed.transcript if r.tag == TAG]
    sketches = [r for r in recs if r.stage == Stage.SKETCH]
    assert len(sketches) == 6 and all(r.form is Form.CIPHERTEXT for r in sketches)
    # a sketch upload is three ciphertexts of one chunk each, far below the update's 5000 values
    assert max(len(r.payload) for r in sketches) < 3 * max(len(r.payload) for r in recs if r.stage == "ckks/keys/public")
    masked = {r.sender for r in recs if r.stage == "secure_sum/masked_input" and r.receiver == "server"}
    assert masked == set(released(fed).kept) and "client/4" not in masked
    to_holder = {(r.stage, r.form) for r in recs if r.receiver == "keyholder"}
    assert to_holder == {(Stage.GRAM_REQUEST, Form.CIPHERTEXT), (Stage.SUM_REQUEST, Form.CIPHERTEXT)}


def test_a_shared_sum_sends_every_client_the_robust_aggregate_scaled_to_all() -> None:
    tag = "fedstruct/nsf_grad"
    fed = build_federation(6, {tag: {"mechanism": NAME, "params": {}}}, extra=["keyholder"])
    xs = honest_and_flipped(fed.clients, seed=3)
    got = fed.exchange.shared_sum(tag, xs)
    rel = released(fed, tag)
    assert rel.coefficients["client/4"] == 0 and len(rel.kept) == 5  # n = 6: f = 1 (n >= 2f + 3)
    values = [v["w"] for v in got.values()]
    assert all(torch.equal(values[0], v) for v in values)
    assert torch.allclose(values[0], sum(xs[c]["w"] for c in rel.kept) * 6 / 5, atol=1e-6)


def _judged(n: int = 5) -> tuple[SecretContext, list[cr.Upload], cr.Expectation, list[torch.Tensor]]:
    preset = resolve_preset({"preset": "default"})
    secret = SecretContext.generate(preset)
    server = secret.public_context(galois=True)
    g = torch.Generator().manual_seed(7)
    vecs = [torch.randn(SIZE, generator=g, dtype=torch.float64) for _ in range(n)]
    ups = [cr.parse_upload(server, cr.encrypt_upload(server, torch.cat([v, torch.ones(1)]), tail=1, preset=preset,
                                                     pid=f"c{k}", with_values=False), length=SIZE + 1, tail=1,
                           with_values=False) for k, v in enumerate(vecs)]
    reply, expect = cr.judge(secret, cr.gram_request(ups), n=n, tail=1, weighted=True, rule="krum", trim=0.0,
                             norm_factor=0.0)
    assert torch.equal(cr.read_coefficients(reply, n), torch.ones(n, dtype=torch.float64))
    return secret, ups, expect, vecs


def test_the_key_holder_releases_the_sketch_sum_of_a_kept_subset_and_refuses_anything_else() -> None:
    secret, ups, expect, vecs = _judged()
    width = 4096
    subset = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)  # client 1 dropped out of the masked sum
    out = release_sketch_sum(secret, sketch_sum_request(ups, subset, weighted=True), expect, width=width, tail=1)
    rel = decode_tensor(out, spec=TensorSpec({"x": (torch.float64, (width + 1,))}))
    total = torch.cat([sum(vecs[k] for k in (0, 2, 3, 4)), torch.tensor([4.0])])
    check_masked_sum(total, rel, tail=1, width=width, terms=4.0, quantization_error=1e-9)
    # a masked input that is not the sketched vector
    lied = total.clone()
    lied[:100] += 1.0
    with pytest.raises(ImplausibleSumError, match="masked another vector"):
        check_masked_sum(lied, rel, tail=1, width=width, terms=4.0, quantization_error=1e-9)
    # counts that are not the sketched ones
    with pytest.raises(ImplausibleSumError, match="counts"):
        check_masked_sum(torch.cat([total[:-1], torch.tensor([9.0])]), rel, tail=1, width=width, terms=4.0,
                         quantization_error=1e-9)
    # a server that asks for one client's sketch while claiming four, or keeps a client the rule dropped
    one = unpack_blobs(sketch_sum_request(ups, torch.tensor([1.0, 0, 0, 0, 0], dtype=torch.float64), weighted=True))
    with pytest.raises(ImplausibleSumError, match="squared norm"):
        release_sketch_sum(secret, pack_blobs([encode_tensor(subset), *one[1:]]), expect, width=width, tail=1)
    dropped = cr.Expectation(torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64), expect.gram, expect.tail,
                             expect.weighted, expect.magnitudes, expect.tails)
    with pytest.raises(ProtocolError, match="did not keep"):
        release_sketch_sum(secret, sketch_sum_request(ups, torch.ones(5, dtype=torch.float64), weighted=True), dropped,
                           width=width, tail=1)


@pytest.mark.parametrize(("params", "match"), [({"rule": "norm"}, "rule must be one of"),
                                               ({"rule": "norm_filter"}, "needs norm_factor > 0"),
                                               ({"norm_factor": 2.0}, "applies to rule 'norm_filter'"),
                                               ({"trim": 0.5}, "trim must be"),
                                               ({"inner_params": {"bogus": 1}}, "not secure_sum parameters"),
                                               ({"inner_params": {"bits": 1}}, "inner_params"),
                                               ({"key_holder": "server"}, "cannot be the server")])
def test_bad_parameters_are_refused(params: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProtocolStack.from_dict({"name": "t", "tags": binding(**params)})


def test_the_plaintext_rule_keeps_the_clients_the_key_holder_keeps() -> None:
    """plaintext_krum (the audit's unprotected comparison) judges the same sketches in the clear."""
    from securefg.protocol.robust.plaintext_krum import NAME as PLAIN_KRUM

    xs = honest_and_flipped([f"client/{k}" for k in range(10)], seed=5)
    weights = {f"client/{k}": float(1 + k) for k in range(10)}
    outs, kept = {}, {}
    for name in (NAME, PLAIN_KRUM):
        fed = build_federation(10, {TAG: {"mechanism": name, "params": {}}}, extra=["keyholder"])
        outs[name] = fed.exchange.aggregate(TAG, xs, weights=weights)["w"]
        kept[name] = tuple(fed.exchange.last_contributors)
    assert kept[NAME] == kept[PLAIN_KRUM] and "client/4" not in kept[NAME]
    assert torch.allclose(outs[NAME], outs[PLAIN_KRUM], atol=1e-9)


def test_the_krum_option_on_a_plaintext_stack_judges_in_the_clear() -> None:
    from securefg.methods.base import method_class
    from securefg.protocol.robust.options import apply_robust_option

    stack = apply_robust_option(ProtocolStack.load("plaintext"), method_class("fedavg"), {"robust": "krum"})
    assert stack.binding_for(TAG).mechanism == "plaintext_krum" and stack.helper_parties() == ()


def test_with_too_few_clients_to_judge_it_is_the_masked_sum_alone() -> None:
    """Krum may drop nobody among four (n >= 2f + 3): no sketch, no key holder, the plain mean."""
    fed = build_federation(4, binding(), extra=["keyholder"])
    xs = honest_and_flipped([*fed.clients, "client/x"])
    xs = {c: xs[c] for c in fed.clients}
    out = fed.exchange.aggregate(TAG, xs)["w"]
    assert torch.allclose(out, sum(x["w"] for x in xs.values()) / 4, atol=1e-9)
    recs = [r for r in fed.transcript if r.tag == TAG]
    assert not any(r.stage == Stage.SKETCH or r.receiver == "keyholder" for r in recs)
    assert set(released(fed).kept) == set(fed.clients)


def test_the_party_programs_judge_five_clients_through_the_key_holder() -> None:
    """FedAvg's default over the party programs: with five clients the judge runs (sketches to the
    server, products to the key holder); the Flower cases use three clients, which skip it."""
    from securefg.experiment import run_experiment
    from securefg.run_config import RunConfig

    res = run_experiment(RunConfig(method="fedavg", dataset="csbm", clients=5, rounds=2, hidden=8, seed=5,
                                   progress=False))
    assert res["protocol"] == "fedavg_secure_robust"
    holder = res["bytes_by_party"]["keyholder"]
    assert holder["received"] > 0 and holder["sent"] > 0  # the flooded products in, coefficients and keys out
    assert all(0.0 <= h["mean_test"] <= 1.0 for h in res["history"])


@pytest.mark.parametrize("rule", ["krum", "closest"])
def test_a_robust_option_keeps_the_stacks_releases_and_names_the_server_where_it_reads_a_blind_sum(rule: str) -> None:
    from securefg.protocol.robust.options import krum_stack, robust_stack

    base = ProtocolStack.load("fedstruct_secure")
    tags = ("fedstruct/update", "fedstruct/nsf_grad")
    derived = krum_stack(base, tags, trim=0.1) if rule == "krum" else robust_stack(base, tags, rule=rule, k=2)
    assert {r.tag for r in derived.releases} == {r.tag for r in base.releases}
    to = {r.tag: set(r.to) for r in derived.releases}
    # ∇S is server-blind by default (blind_sum); a rule the server runs makes it read the robust sum
    assert "server" not in {t for r in base.releases if r.tag == "fedstruct/nsf_grad" for t in r.to}
    if rule == "krum":  # blind_robust: the rule runs at the key holder, the sum stays the clients'
        assert to["fedstruct/nsf_grad"] == {"clients"} and to["fedstruct/abar"] == {"clients"}
    else:  # a rule the server runs makes it read the robust sum
        assert to["fedstruct/nsf_grad"] == {"clients", "server"} and to["fedstruct/abar"] == {"clients"}


def test_a_client_sketches_its_input_as_a_saturating_sum_carries_it() -> None:
    """Under on_clip = "saturate" the masked sum clips each value; the sketch must be of that vector,
    or an honest client with one large coordinate would abort the round as a liar."""
    fed = build_federation(6, binding(rule="norm_filter", norm_factor=100.0,
                                      inner_params={"clip": 1.0, "on_clip": "saturate"}), extra=["keyholder"])
    xs = {c: {"w": torch.full((SIZE,), 0.1, dtype=torch.float64)} for c in fed.clients}
    xs["client/1"]["w"][0] = 5.0  # saturated to 1.0 by the sum
    out = fed.exchange.aggregate(TAG, xs, mean=False)["w"]
    assert len(released(fed).kept) == 6  # nobody is above 100x the median norm
    assert abs(float(out[0]) - 1.5) < 1e-4 and float(out[1:].sub(0.6).abs().max()) < 1e-4
