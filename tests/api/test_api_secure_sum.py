"""securefg.api's secure sum driven in memory: sums, dropouts at every stage, bad messages, configs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import numpy as np
import pytest
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from securefg.api import (
    AbortReason,
    ClientDropReason,
    CodecError,
    ConfigError,
    InvalidClaimError,
    KeySubstitutionError,
    SecureSumClient,
    SecureSumConfig,
    SecureSumResult,
    SecureSumServer,
    TooFewSurvivorsError,
    UnexpectedMessageError,
)
from securefg.api._wire import frame, unframe
from securefg.protocol.secure_sum.messages import AdvertiseRequest, decode_peer_keys, encode_peer_keys

SESSION = bytes(range(16))
TAG = "t"
CONFIG = SecureSumConfig(clip=100.0, resolution=1e-6)
Tamper = Callable[[str, str, bytes], bytes | None]


def inputs(n: int, m: int = 6, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"c{i}": rng.normal(size=m) for i in range(n)}


def run(config: SecureSumConfig, x: Mapping[str, np.ndarray], *, silent: Mapping[str, str] | None = None,
        online: set[str] | None = None, tamper: Tamper | None = None,
        server_tamper: Tamper | None = None, **keys: object) -> tuple[SecureSumResult | None, SecureSumServer]:
    """Drive one call; ``silent[c] = stage``: client ``c`` stops answering at that stage;
    ``tamper(stage, client, reply)`` / ``server_tamper(stage, client, message)`` rewrite bytes."""
    pinned = keys.get("pinned_keys")
    signing = keys.get("signing_keys", {})
    clients = {c: SecureSumClient(config, pid=c, vector=v, session=SESSION, round=3, tag=TAG,
                                  signing_key=signing.get(c), pinned_keys=pinned)  # type: ignore[union-attr,arg-type]
               for c, v in x.items()}
    server = SecureSumServer(config, clients=list(x), length=len(next(iter(x.values()))), session=SESSION, round=3,
                             tag=TAG, pinned_keys=pinned)  # type: ignore[arg-type]
    out = server.start(online)
    while not server.done:
        stage = server.stage
        assert stage is not None
        replies = {}
        for c, message in out.items():
            if (silent or {}).get(c) == stage:
                continue
            if server_tamper is not None:
                message = server_tamper(stage, c, message) or message
            reply = clients[c].handle(message)
            replies[c] = (tamper(stage, c, reply) if tamper else None) or reply
        out = server.receive(replies)
    return server.result, server


def ring_sum(config: SecureSumConfig, x: Mapping[str, np.ndarray], who: tuple[str, ...], n: int, bits: int) -> list[int]:
    total = [0] * len(next(iter(x.values())))
    for c in who:
        for i, w in enumerate(config.quantize(x[c], clients=n)):
            total[i] = (total[i] + int(w)) % (1 << bits)
    return total


@pytest.mark.parametrize("stage", ["secure_sum/advertise_keys", "secure_sum/share_keys", "secure_sum/masked_input",
                                   "secure_sum/unmask"])
def test_the_sum_over_survivors_is_exact_in_the_ring_whatever_stage_a_client_drops_at(stage: str) -> None:
    x = inputs(5)
    snapshot = {c: v.copy() for c, v in x.items()}
    result, _ = run(CONFIG, x, silent={"c2": stage})
    assert result is not None
    in_sum = stage == "secure_sum/unmask"  # its masked input arrived: the others reveal its self mask
    assert ("c2" in result.contributors) is in_sum
    assert result.drops == {"c2": ClientDropReason.NO_RESPONSE}  # at unmask: in the sum, but it answered no more
    assert [int(w) for w in result.ring_total] == ring_sum(CONFIG, x, result.contributors, 5, result.ring_bits)
    plain = sum(x[c] for c in result.contributors)
    assert np.abs(result.total.numpy() - plain).max() <= result.error_bound
    assert all(np.array_equal(x[c], snapshot[c]) for c in x)  # inputs unchanged


def test_a_client_offline_from_the_start_is_left_out() -> None:
    x = inputs(4)
    result, _ = run(CONFIG, x, online={"c0", "c1", "c3"})
    assert result is not None and result.contributors == ("c0", "c1", "c3")
    assert result.drops == {"c2": ClientDropReason.NO_RESPONSE}


def test_the_call_is_aborted_below_the_threshold_and_reveals_nothing() -> None:
    x = inputs(3)
    with pytest.raises(TooFewSurvivorsError, match="fewer than the 2 required"):
        run(CONFIG, x, silent={"c0": "secure_sum/masked_input", "c1": "secure_sum/masked_input"})


def test_a_reply_that_is_not_a_securefg_message_drops_its_client_as_malformed() -> None:
    result, server = run(CONFIG, inputs(5), tamper=lambda s, c, r: b"junk" if (s, c) == ("secure_sum/share_keys", "c4") else None)
    assert result is not None and "c4" not in result.contributors
    assert server.drops["c4"] is ClientDropReason.MALFORMED_MESSAGE


def test_a_reply_of_another_stage_drops_its_client_as_malformed() -> None:
    def replay(stage: str, c: str, reply: bytes) -> bytes | None:
        return frame("secure_sum/advertise_keys", unframe(reply, what="x")[1]) if (stage, c) == (
            "secure_sum/masked_input", "c1") else None

    result, server = run(CONFIG, inputs(5), tamper=replay)
    assert result is not None and "c1" not in result.contributors
    assert server.drops["c1"] is ClientDropReason.MALFORMED_MESSAGE


def test_the_server_refuses_a_reply_from_an_id_outside_the_call() -> None:
    server = SecureSumServer(CONFIG, clients=["c0", "c1", "c2"], length=4, session=SESSION, round=0, tag=TAG)
    server.start()
    with pytest.raises(UnexpectedMessageError, match="'c9' is not a client of this secure-sum call"):
        server.receive({"c9": b""})


def test_a_client_aborts_if_the_server_lists_the_same_client_twice_then_refuses_everything() -> None:
    client = SecureSumClient(CONFIG, pid="c0", vector=np.ones(4), session=SESSION, round=0, tag=TAG)
    degree, threshold = CONFIG.graph(4)
    lie = AdvertiseRequest(clients=("c0", "c1", "c2", "c1"), neighbours=("c1", "c2", "c3"), threshold=threshold,
                           degree=degree, length=4).encode()
    with pytest.raises(InvalidClaimError, match="lists 'c1' twice") as err:
        client.handle(frame("secure_sum/advertise_keys", lie))
    assert err.value.reason is AbortReason.DUPLICATE_ID and client.stage is None and not client.done
    with pytest.raises(UnexpectedMessageError, match="already failed"):
        client.handle(frame("secure_sum/advertise_keys", lie))


def test_a_client_refuses_a_server_with_another_config() -> None:
    x = inputs(4)
    client = SecureSumClient(SecureSumConfig(clip=100.0, resolution=1e-6, threshold=0.9), pid="c0", vector=x["c0"],
                             session=SESSION, round=0, tag=TAG)
    server = SecureSumServer(CONFIG, clients=list(x), length=6, session=SESSION, round=0, tag=TAG)
    with pytest.raises(InvalidClaimError, match="does not match this client's stack") as err:
        client.handle(server.start()["c0"])
    assert err.value.reason is AbortReason.CONFIG_MISMATCH


def test_a_client_rejects_bytes_that_are_not_a_message_and_a_message_of_another_stage() -> None:
    client = SecureSumClient(CONFIG, pid="c0", vector=np.ones(4), session=SESSION, round=0, tag=TAG)
    with pytest.raises(CodecError, match="not a securefg API message|truncated"):
        client.handle(b"\x03\x00\x00\x00abc")
    with pytest.raises(UnexpectedMessageError, match="does not accept a 'secure_sum/unmask' message"):
        client.handle(frame("secure_sum/unmask", b""))
    assert client.stage == "secure_sum/advertise_keys"  # a stray message leaves the call as it was


def test_pinned_keys_sum_and_catch_a_server_that_substitutes_a_key() -> None:
    config = SecureSumConfig(clip=100.0, resolution=1e-6, signatures=True, pinned_keys="run")
    x = inputs(5)
    signing = {c: Ed25519PrivateKey.generate() for c in x}
    pinned = {c: k.public_key().public_bytes_raw() for c, k in signing.items()}
    result, _ = run(config, x, pinned_keys=pinned, signing_keys=signing)
    assert result is not None and result.contributors == tuple(sorted(x))

    def substitute(stage: str, c: str, message: bytes) -> bytes | None:
        if (stage, c) != ("secure_sum/share_keys", "c0"):
            return None
        peers = decode_peer_keys(unframe(message, what="x")[1], signed=True)
        forged = [p.__class__(p.pid, os.urandom(32), p.s_pk, p.sign_pk, p.key_sig) if p.pid == "c1" else p for p in peers]
        return frame(stage, encode_peer_keys(forged, signed=True))

    with pytest.raises(KeySubstitutionError, match="the keys of 'c1'"):
        run(config, x, pinned_keys=pinned, signing_keys=signing, server_tamper=substitute)
    with pytest.raises(ConfigError, match="pinned_keys"):
        SecureSumClient(config, pid="c0", vector=x["c0"], session=SESSION, round=0, tag=TAG)


def test_configs_from_a_stack_and_from_code_agree_and_voided_settings_need_unsafe(tmp_path) -> None:
    shipped = SecureSumConfig.from_stack("fedavg_secure_sum", "fedavg/update")
    assert shipped.params == SecureSumConfig(**{k: v for k, v in shipped.params.items() if k != "relay_sum"}).params
    with pytest.raises(ConfigError, match="equivocation_threshold"):
        SecureSumConfig(threshold=0.5)
    waived = SecureSumConfig(threshold=0.5, unsafe="a test of the refusal")
    assert [f.protection for f in waived.failed_protections] == ["secure_sum/equivocation_threshold"]
    with pytest.raises(ConfigError, match="binds 'fedavg/update' to 'plaintext', not 'secure_sum'"):
        SecureSumConfig.from_stack("fedavg_dp", "fedavg/update")
    stack = tmp_path / "s.toml"
    stack.write_text('name = "s"\n[tags."u/*"]\nmechanism = "secure_sum"\nparams = { clip = 10.0 }\n'
                     'transforms = [{ name = "clip_norm", clip = 1.0 }]\n')
    config = SecureSumConfig.from_stack(stack, "u/x")
    assert config.params["clip"] == 10.0 and config.transforms == ("clip_norm",)


def test_inputs_must_be_finite_vectors_and_the_session_long_enough() -> None:
    from securefg.api import InvalidInputError

    with pytest.raises(InvalidInputError, match="NaN or Inf"):
        SecureSumClient(CONFIG, pid="c0", vector=torch.tensor([1.0, float("nan")]), session=SESSION, round=0, tag=TAG)
    with pytest.raises(InvalidInputError, match="session must be 16..64 bytes"):
        SecureSumClient(CONFIG, pid="c0", vector=np.ones(3), session=b"short", round=0, tag=TAG)
