"""Declared releases: a stack names what it releases by design, the attacks that measure it, its DP knob."""

from __future__ import annotations

import pytest

from securefg.errors import ConfigError
from securefg.protocol.stack import ProtocolStack

BASE = {"name": "s", "tags": {"x/*": {"mechanism": "plaintext"}}}


def stack(releases: object) -> ProtocolStack:
    return ProtocolStack.from_dict({**BASE, "releases": releases})


def test_a_release_with_a_stack_knob_and_one_with_an_option_knob_load_and_round_trip() -> None:
    s = stack([
        {"tag": "x/emb", "to": ["server"], "what": "cosines", "attacks": ["community_inference"],
         "knob": {"stack": "fedpub_dp", "tag": "x/emb", "param": "noise_multiplier", "values": [0.3, 1, 3]}},
        {"tag": "x/rows", "to": ["clients"], "what": "rows", "attacks": ["structure_link"],
         "knob": {"option": "edge_dp_epsilon", "values": [2, 4, 8], "with": {"edge_dp_local_graph": True}}},
    ])
    assert [r.tag for r in s.releases_for("community_inference")] == ["x/emb"]
    assert s.releases_for("label_inference") == ()
    assert s.releases[1].knob is not None and s.releases[1].knob.values == (2.0, 4.0, 8.0)
    assert "--option edge_dp_local_graph=true" in s.releases[1].knob.describe()
    content = s.content()
    tags = content.pop("bindings")
    again = ProtocolStack.from_dict({**content, "tags": tags})
    assert again.content() == s.content()


def test_a_stack_without_releases_keeps_its_content_and_so_its_hash() -> None:
    assert "releases" not in ProtocolStack.from_dict(BASE).content()


@pytest.mark.parametrize("releases, problem", [
    ({"tag": "x"}, "array of tables"),
    ([{"tag": "x/a", "to": ["mallory"], "attacks": ["a"]}], "'to' must list parties"),
    ([{"tag": "x/a", "to": ["server"], "attacks": []}], "'attacks' must list"),
    ([{"tag": "x/a", "to": ["server"], "attacks": ["a"], "colour": 1}], "unknown key 'colour'"),
    ([{"tag": "x/a", "to": ["server"], "attacks": ["a"], "knob": {"option": "e", "values": [1, 2]}}], "at least three"),
    ([{"tag": "x/a", "to": ["server"], "attacks": ["a"], "knob": {"option": "e", "values": [1, 2, -3]}}], "positive"),
    ([{"tag": "x/a", "to": ["server"], "attacks": ["a"], "knob": {"stack": "s", "values": [1, 2, 3]}}], "all of 'stack'"),
    ([{"tag": "x/a", "to": ["server"], "attacks": ["a"],
       "knob": {"option": "e", "stack": "s", "tag": "t", "param": "p", "values": [1, 2, 3]}}], "not both"),
])
def test_a_bad_release_is_refused_naming_it(releases: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        stack(releases)


@pytest.mark.parametrize("name", ["fedpub_ckks", "fedpub_dp", "fedstruct_secure", "fedsage_secure", "fedsage_dp", "fedsheafhn_secure", "fedsheafhn_feedback_dp",
                                  "fedsheafhn_dp"])
def test_the_shipped_releases_name_registered_attacks_bound_tags_and_loadable_knobs(name: str) -> None:
    import securefg.attacks  # noqa: F401  (registers the attacks)
    from securefg.attacks.base import attack_class

    s = ProtocolStack.load(name)
    assert s.releases
    for r in s.releases:
        s.binding_for(r.tag)
        for a in r.attacks:
            attack_class(a)
        if r.knob is not None and r.knob.stack is not None:
            knob_stack = ProtocolStack.load(r.knob.stack)
            binding = knob_stack.binding_for(r.knob.tag or r.tag)
            assert any(r.knob.param in t.params for t in binding.transforms), (r.knob.stack, r.knob.tag)
