"""``blind_sum``'s group key is tied to its leader: a lying server cannot hand clients a key of its own.

The attack (issue 38, class 8 applied to ``blind_sum``): the server forwards the leader's sealed
boxes, and it can learn every client's *public* sealing key. Under anonymous sealed boxes it
could seal a group key it drew itself to a client's public key and forward that box instead;
the client would blind under the server's key and the server could remove the blinding. Every
box is now sealed with the leader's static sealing key, and a client opens it only under the
leader's public key (received over the authenticated channels).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest
import torch

from securefg.errors import ProtocolError, SenderAuthenticationError
from securefg.federation.channel import length_prefixed
from securefg.federation.envelope import Envelope
from securefg.federation.party import SERVER
from securefg.protocol.relay import sealing_directory
from securefg.protocol.relay.sealed_box import SealingKey, seal
from securefg.protocol.secure_sum import BlindSum, group_key
from securefg.protocol.secure_sum.constants import Domain
from securefg.protocol.secure_sum.group_key import STAGE_DOWN, held_key

from .conftest import World

PARAMS = {"clip": 4.0, "resolution": 2.0**-20, "dropout_rate": 0.0, "adversarial_rate": 0.0}
LEADER, VICTIM = "client/0", "client/2"
SERVER_KEY = os.urandom(32)  # the group key the lying server wants the victim to blind under


def _context(session: bytes, leader: str, receiver: str) -> bytes:
    """The box's binding, rebuilt from the domain label (the strongest liar uses the right one)."""
    return length_prefixed(Domain.GROUP_KEY.value, session, leader.encode(), receiver.encode())


def _lie_to_victim(monkeypatch: pytest.MonkeyPatch, transport: Any, parties: Any, *,
                   sealed_with: SealingKey | None = None) -> None:
    """Make ``transport`` forward, in place of the leader's box to the victim, a box the server
    sealed itself to the victim's public sealing key (anonymously, or with ``sealed_with``)."""
    real_send = transport.send

    def send(env: Envelope) -> None:
        if env.sender == SERVER and env.stage == STAGE_DOWN and env.receivers == (VICTIM,):
            (st,) = parties[VICTIM].state["mech/sealing"].values()  # the victim's public key: public
            public, context = st["own"].public_bytes, _context(transport.session, LEADER, VICTIM)
            box = (seal(public, SERVER_KEY, context=context) if sealed_with is None
                   else sealed_with.seal_from(public, SERVER_KEY, context=context))
            env = replace(env, payload=box)
        real_send(env)

    monkeypatch.setattr(transport, "send", send)


def test_a_group_key_the_server_sealed_to_a_clients_public_key_is_refused_naming_the_leader(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    mech = BlindSum(**PARAMS)
    _lie_to_victim(monkeypatch, world.transport, world.parties)
    with pytest.raises(SenderAuthenticationError,
                       match=r"client/2 refused the blind_sum group key for 't': it was not sealed by the leader "
                             r"client/0") as info:
        mech.run_shared_sum(world.call(mech), world.inputs(8))
    assert info.value.sender == LEADER
    assert held_key(world.call(mech), VICTIM) is None  # it never blinds under the server's key


def test_a_group_key_the_server_sealed_with_its_own_sealing_key_is_refused(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    mech = BlindSum(**PARAMS)
    _lie_to_victim(monkeypatch, world.transport, world.parties, sealed_with=SealingKey())
    with pytest.raises(SenderAuthenticationError, match=r"not sealed by the leader client/0") as info:
        mech.run_shared_sum(world.call(mech), world.inputs(8))
    assert info.value.sender == LEADER


def test_a_client_refuses_a_group_key_from_a_leader_that_is_not_another_client(world: World) -> None:
    mech = BlindSum(**PARAMS)
    call = world.call(mech)
    sealing_directory.ensure(call, holders=[VICTIM], owners=[SERVER])  # the victim even holds its key
    server_key = sealing_directory.own_key(call, SERVER)
    sealing_directory.ensure(call, holders=[SERVER], owners=[VICTIM])
    box = server_key.seal_from(sealing_directory.peer_public(call, SERVER, VICTIM), SERVER_KEY,
                               context=group_key.box_context(world.transport.session, SERVER, VICTIM))
    for leader in (SERVER, VICTIM):
        with pytest.raises(SenderAuthenticationError, match=r"only another client may lead") as info:
            group_key.open_key(call, VICTIM, leader, box)
        assert info.value.sender == leader
    assert held_key(call, VICTIM) is None


def test_the_leader_never_seals_the_group_key_to_the_server(world: World) -> None:
    mech = BlindSum(**PARAMS)
    call = world.call(mech)
    group_key.draw_key(call, LEADER)
    sealing_directory.ensure(call, holders=[LEADER], owners=[SERVER])  # a server that published a key to it
    for receiver in (SERVER, LEADER):
        with pytest.raises(ProtocolError, match=rf"asked to seal the blind_sum group key to '{receiver}'; only the "
                                                r"other clients may hold it"):
            group_key.seal_key(call, LEADER, receiver)


def test_an_honest_setup_gives_every_client_the_leaders_key_through_sender_sealed_boxes(world: World) -> None:
    mech = BlindSum(**PARAMS)
    inputs = world.inputs(16, seed=1)
    got = mech.run_shared_sum(world.call(mech), inputs)
    expected = sum(inputs.values())
    assert all(float((o.total - expected).abs().max()) <= mech.last_report.error_bound for o in got.values())
    call = world.call(mech)
    assert len({held_key(call, c) for c in world.clients}) == 1
    # the leader published its sealing key to every receiver (they check its boxes against it)
    published = {(r.sender, r.receiver) for r in world.transport.transcript if r.stage == sealing_directory.STAGE}
    assert {(LEADER, c) for c in world.clients if c != LEADER} <= published


# --------------------------------------------------------------------------- party programs
def test_the_party_programs_refuse_a_group_key_the_server_substituted(monkeypatch: pytest.MonkeyPatch) -> None:
    # FedStruct-B under its default stack (fedstruct/nsf_grad is blind_sum), over the party
    # programs: the server half forwards its own box to client/2 in place of the leader's
    from securefg.data.partition import RandomPartitioner, client_subgraphs
    from securefg.data.synthetic import make_csbm
    from securefg.federation.federation import Federation
    from securefg.federation.program import shared_sum as program
    from securefg.federation.runner import RoundRunner
    from securefg.methods.base import MethodConfig, method_class
    from securefg.methods.tasks import NodeTask
    from securefg.methods.training import TrainConfig
    from securefg.protocol.stack import ProtocolStack

    g = make_csbm(num_nodes=150, num_classes=3, num_features=12, p_in=0.06, p_out=0.01, seed=0)
    task = NodeTask(clients=client_subgraphs(g, RandomPartitioner(3, seed=0)(g)), num_features=12, num_classes=3,
                    full_graph=g)
    cfg = MethodConfig(rounds=1, train=TrainConfig(lr=0.01), seed=0,
                       options={"structure_hops": 3, "structure_dim": 16})
    method = method_class("fedstruct")(task, cfg)
    fed = Federation(method.num_clients, ProtocolStack.load("fedstruct_secure"), seed=0)
    real = program._ensure_group_key

    def lying_server(ex: Any, tag: str, members: list[str]) -> None:
        _lie_to_victim(monkeypatch, ex.rt.transport, fed.parties)
        real(ex, tag, members)

    monkeypatch.setattr(program, "_ensure_group_key", lying_server)
    torch.manual_seed(0)
    with pytest.raises(SenderAuthenticationError,
                       match=r"client/2 refused the blind_sum group key for 'fedstruct/nsf_grad'") as info:
        RoundRunner(method, fed, rounds=1, progress=False).run()
    assert info.value.sender == LEADER
    assert not fed.parties[VICTIM].state.get("mech/blind_sum", {}).get("group_key")
