"""Malicious-server mode, honest runs: pinned keys change no sum, with or without dropouts.

The directory comes from the run (``pinned_keys = "run"``, as a Federation provisions it) or
from a directory file built the way ``securefg keys new`` / ``securefg keys directory`` do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from securefg.errors import AuthenticationError
from securefg.protocol.secure_sum import BlindSum, SecureSum
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.pinned import PinnedKeys, provision, provision_run

from .conftest import World

PINNED = {"signatures": True, "pinned_keys": "run", "resolution": 2.0**-20, "clip": 8.0}


def _close(a: torch.Tensor, b: torch.Tensor, mech: SecureSum, n: int) -> bool:
    return float((a - b).abs().max()) <= mech.settings.quantizer(n).error_bound(n)


@pytest.mark.parametrize("drops", [{}, {Stage.MASKED_INPUT.value: {"client/2"}},
                                   {Stage.CONSISTENCY_CHECK.value: {"client/5"}}, {Stage.UNMASK.value: {"client/1"}}])
def test_aggregate_under_pinned_keys_equals_the_plaintext_sum_of_the_survivors(drops: dict[str, set[str]]) -> None:
    world = World(7)
    provision_run(world.parties)
    mech = SecureSum(**PINNED)
    inputs = world.inputs(32)
    out = mech.run_aggregate(world.call(mech, dropouts=drops), inputs)
    assert _close(out.total, sum(inputs[c] for c in out.contributors), mech, 7)
    gone = set().union(*drops.values()) if drops else set()
    assert set(out.contributors) == set(world.clients) - (gone if Stage.MASKED_INPUT.value in drops else set())


@pytest.mark.parametrize("relay_sum", [False, True])
def test_peer_sum_under_pinned_keys_gives_the_target_its_peers_sum(relay_sum: bool) -> None:
    world = World(6)
    provision_run(world.parties)
    mech = SecureSum(**PINNED, relay_sum=relay_sum)
    inputs = world.inputs(32, exclude="client/3")
    out = mech.run_peer_sum(world.call(mech), "client/3", inputs)
    assert _close(out.total, sum(inputs.values()), mech, 5)


def test_blind_sum_under_pinned_keys_and_a_norm_bound_reaches_every_client() -> None:
    world = World(5)
    provision_run(world.parties)
    mech = BlindSum(**PINNED, norm_bound=4.0)
    inputs = world.inputs(16, scale=0.1)
    got = mech.run_shared_sum(world.call(mech, tag="g"), inputs)
    assert set(got) == set(world.clients)
    assert all(_close(o.total, sum(inputs.values()), mech, 5) for o in got.values())


def test_a_directory_file_from_the_deployment_commands_pins_the_clients(tmp_path: Path) -> None:
    from securefg.integrations.flower.deploy import build_directory, load_signing_keys, new_keys, signing_seed

    world = World(4)
    publics = [new_keys(pid, tmp_path / pid.replace("/", "_")) for pid in ["server", *world.clients]]
    build_directory(publics, tmp_path / "directory.json")
    keys = load_signing_keys(tmp_path / "directory.json")
    assert isinstance(keys, PinnedKeys) and set(keys.keys) == {"server", *world.clients}
    for pid, party in world.parties.items():  # what securefg party does with --directory
        provision(party.state, keys, signing_seed(tmp_path / pid.replace("/", "_")) if pid != "server" else None)
    mech = SecureSum(**{**PINNED, "pinned_keys": str(tmp_path / "directory.json")})
    inputs = world.inputs(8)
    assert _close(mech.run_aggregate(world.call(mech), inputs).total, sum(inputs.values()), mech, 4)


def test_a_client_whose_key_the_directory_file_does_not_pin_stops(tmp_path: Path) -> None:
    from securefg.integrations.flower.deploy import build_directory, new_keys

    world = World(3)
    build_directory([new_keys(pid, tmp_path / pid.replace("/", "_")) for pid in world.clients], tmp_path / "d.json")
    provision_run(world.parties)  # keys of another run: not the ones the file pins
    mech = SecureSum(**{**PINNED, "pinned_keys": str(tmp_path / "d.json")})
    with pytest.raises(AuthenticationError, match="holds no key, or another key, for 'client/0'"):
        mech.run_aggregate(world.call(mech), world.inputs(4))
