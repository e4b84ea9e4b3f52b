"""blind_robust: masked_robust's rule over a blind sum; the clients check, the server never reads the sum."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from securefg.errors import AuthenticationError, ConfigError, ImplausibleSumError, ProtocolError
from securefg.federation.envelope import Form
from securefg.protocol.relay.blob_list import unpack_blobs
from securefg.protocol.robust.blind_robust import NAME, Stage, open_release, seal_release
from securefg.protocol.robust.masked_robust import Stage as MaskedStage
from securefg.protocol.shared_result import STAGE as RESULT_STAGE
from tests.protocol.federation_fixture import build_federation
from tests.protocol.robust.test_ckks_robust import honest_and_flipped

TAG = "fedstruct/nsf_grad"


def federation(n: int, **params: Any) -> Any:
    return build_federation(n, {TAG: {"mechanism": NAME, "params": params}}, extra=["keyholder"])


def released(fed: Any) -> Any:
    return fed.parties["server"].state[f"mech/{NAME}"]["released"][(TAG, fed.exchange.round)]


@pytest.mark.parametrize("params", [{"trim": 0.2}, {"rule": "norm_filter", "norm_factor": 3.0}])
def test_every_client_reads_the_kept_sum_scaled_to_all_and_the_flipped_one_is_dropped(params: dict[str, Any]) -> None:
    fed = federation(6, **params)
    xs = honest_and_flipped(fed.clients, seed=3)
    got = fed.exchange.shared_sum(TAG, xs)
    rel = released(fed)
    assert rel.coefficients["client/4"] == 0 and len(rel.kept) == 5
    assert set(got) == set(fed.clients)  # the dropped client reads the result too
    want = sum(xs[c]["w"] for c in rel.kept) * 6 / 5
    assert all(torch.allclose(v["w"], want, atol=1e-5) for v in got.values())


def test_the_server_sees_no_sum_and_no_sketch_sum() -> None:
    fed = federation(6)
    fed.exchange.shared_sum(TAG, honest_and_flipped(fed.clients, seed=1))
    recs = [r for r in fed.transcript if r.tag == TAG]
    to_server_clear = [r for r in recs if r.receiver == "server" and r.form in (Form.PLAINTEXT, Form.AGGREGATE)]
    assert to_server_clear == []  # the key holder's coefficients come as bookkeeping (Form.KEYS)
    from_holder = {(r.stage, r.form) for r in recs if r.sender == "keyholder" and r.receiver == "server"}
    assert (Stage.SKETCH_RELEASE, Form.SEALED) in from_holder
    results = [r for r in recs if r.stage == RESULT_STAGE]
    assert results and all(r.form is Form.MASKED for r in results)
    masked = {r.sender for r in recs if r.stage == "secure_sum/masked_input" and r.receiver == "server"}
    assert "client/4" not in masked and len(masked) == 5


def test_a_kept_client_that_masks_another_vector_than_it_sketched_is_caught_by_every_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from securefg.protocol.secure_sum.blind import BlindSum

    fed = federation(6)
    xs = honest_and_flipped(fed.clients, seed=2)
    run = BlindSum._run

    def swap(self: Any, call: Any, server: str, inputs: Any, **kw: Any) -> Any:  # client/0 masks a boosted vector
        inputs = {p: (v * 10 if p == "client/0" else v) for p, v in inputs.items()}
        return run(self, call, server, inputs, **kw)

    monkeypatch.setattr(BlindSum, "_run", swap)
    with pytest.raises(ImplausibleSumError, match="not the sum of the kept clients' sketches"):
        fed.exchange.shared_sum(TAG, xs)


def test_the_release_opens_only_for_its_client_in_its_call() -> None:
    from securefg.protocol.mechanism import ExchangeKind
    from securefg.protocol.relay import sealing_directory

    fed = federation(3)
    _, call = fed.exchange._call(TAG, ExchangeKind.SHARED_SUM)
    sealing_directory.ensure(call, holders=["keyholder"], owners=fed.clients)
    sealing_directory.ensure(call, holders=fed.clients, owners=["keyholder"])
    boxes = unpack_blobs(seal_release(call, "keyholder", fed.clients, b"sketch"), max_count=3)
    assert open_release(call, "client/0", "keyholder", boxes[0]) == b"sketch"
    with pytest.raises(AuthenticationError):  # sealed to another client
        open_release(call, "client/1", "keyholder", boxes[0])
    fed.exchange.round += 1
    _, later = fed.exchange._call(TAG, ExchangeKind.SHARED_SUM)
    with pytest.raises(AuthenticationError):  # replayed into another round
        open_release(later, "client/0", "keyholder", boxes[0])
    with pytest.raises(ProtocolError, match="only clients"):
        seal_release(call, "keyholder", ["server"], b"sketch")


def test_an_aggregate_is_refused_the_server_may_not_read_the_sum() -> None:
    fed = federation(5)
    with pytest.raises(ConfigError, match="carries only \\['shared_sum'\\]"):
        fed.exchange.aggregate(TAG, honest_and_flipped(fed.clients))


def test_the_party_programs_keep_fedstructs_gradient_sum_from_the_server() -> None:
    """FedStruct-B over the party programs on its default (the norm filter, blind_robust for ∇S): the
    same scores as fedstruct_secure when nobody is dropped; the server reads nothing of the tag (the
    coefficients are bookkeeping)."""
    from securefg.experiment import run_experiment
    from securefg.run_config import RunConfig

    base = {"method": "fedstruct", "dataset": "csbm", "clients": 5, "rounds": 2, "seed": 5, "progress": False}
    opts = {"structure_hops": 2, "structure_dim": 8}
    plain = run_experiment(RunConfig(**base, protocol="fedstruct_secure", options=opts))
    robust = run_experiment(RunConfig(**base, options=opts))
    assert robust["protocol"] == "fedstruct_secure_robust"
    rel = robust["_federation"].parties["server"].state[f"mech/{NAME}"]["released"]
    assert len(rel) == 2 and all(set(r.kept) == {f"client/{k}" for k in range(5)} for r in rel.values())
    assert [h["mean_test"] for h in robust["history"]] == [h["mean_test"] for h in plain["history"]]
    readable = {(r.stage, r.sender) for r in robust["_federation"].transcript
                if r.tag == TAG and r.receiver == "server" and r.form in (Form.PLAINTEXT, Form.AGGREGATE)}
    assert readable == set()
    coefficients = {r.form for r in robust["_federation"].transcript if r.tag == TAG and r.stage == MaskedStage.GRAM_RESULT}
    assert coefficients == {Form.KEYS}
