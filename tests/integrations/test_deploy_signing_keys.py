"""The deployment files carry each party's secure-sum signing key (what ``pinned_keys = "run"`` pins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from securefg.errors import AuthenticationError
from securefg.integrations.flower import deploy
from securefg.protocol.secure_sum.pinned import identity_from_channel_key, public_of


def test_public_json_carries_the_signing_key_derived_from_the_private_key(tmp_path: Path) -> None:
    public = deploy.new_keys("client/0", tmp_path / "c0")
    data = json.loads(public.read_text())
    raw = (tmp_path / "c0" / deploy.PRIVATE_KEY).read_bytes()
    assert bytes.fromhex(data["signing_key"]) == public_of(identity_from_channel_key(raw))
    assert deploy.signing_seed(tmp_path / "c0") == identity_from_channel_key(raw)
    assert data["signing_key"] != data["public_key"]


def test_the_directory_pins_both_keys_and_still_reads_an_old_one(tmp_path: Path) -> None:
    publics = [deploy.new_keys(pid, tmp_path / pid.replace("/", "_")) for pid in ("server", "client/0")]
    old = tmp_path / "old" / "public.json"  # a public.json from before signing keys
    old.parent.mkdir()
    old.write_text(json.dumps({"pid": "client/1", "public_key": "cd" * 32}))
    directory = deploy.build_directory([*publics, old], tmp_path / "directory.json")
    assert set(directory["client/0"]) == {"public_key", "signing_key"} and directory["client/1"] == "cd" * 32
    channel = deploy.load_directory(tmp_path / "directory.json")
    assert channel["client/1"] == bytes.fromhex("cd" * 32)
    assert channel["client/0"] == bytes.fromhex(json.loads(publics[1].read_text())["public_key"])
    signing = deploy.load_signing_keys(tmp_path / "directory.json")
    assert signing is not None and set(signing.keys) == {"server", "client/0"}
    (tmp_path / "v1.json").write_text(json.dumps({"client/1": "cd" * 32}))
    assert deploy.load_signing_keys(tmp_path / "v1.json") is None


def test_a_party_whose_signing_key_the_directory_does_not_pin_stops(tmp_path: Path) -> None:
    from securefg.integrations.flower.party import _signing_keys

    mine = deploy.new_keys("client/0", tmp_path / "mine")
    other = deploy.new_keys("client/0", tmp_path / "other")
    deploy.build_directory([other], tmp_path / "directory.json")
    with pytest.raises(AuthenticationError, match="holds no signing key, or another one, for 'client/0'"):
        _signing_keys(tmp_path / "directory.json", mine.parent, "client/0")
    keys, seed = _signing_keys(tmp_path / "directory.json", other.parent, "client/0")
    assert keys is not None and seed == deploy.signing_seed(other.parent)
