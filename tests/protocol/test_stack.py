import pytest

from securefg.errors import ConfigError
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack, protocols_dir


def test_every_shipped_stack_loads():
    files = sorted(protocols_dir().glob("*.toml"))
    assert files, "no stacks shipped"
    for f in files:
        ProtocolStack.load(f)


def test_exact_tag_beats_glob():
    s = ProtocolStack.from_dict({"name": "s", "tags": {"*": {"mechanism": "plaintext"}, "a/b": {"mechanism": "plaintext", "params": {"shuffle_seed": 3}}}})
    assert s.binding_for("a/b").pattern == "a/b"
    assert s.binding_for("a/c").pattern == "*"


def test_all_problems_are_reported_at_once_with_the_file():
    with pytest.raises(ConfigError) as info:
        ProtocolStack.from_dict(
            {"name": "bad", "oops": 1, "tags": {"x": {"mechanism": "nope"}, "y": {"mechanism": "plaintext", "params": {"zzz": 1}}, "z": {"foo": 1}}},
            source="bad.toml",
        )
    msg = str(info.value)
    assert "bad.toml" in msg
    assert "unknown top-level key 'oops'" in msg
    assert "tags.'z': unknown key 'foo'" in msg


def test_unknown_mechanism_lists_choices():
    with pytest.raises(ConfigError, match=r"Could not resolve mechanism 'nope' among choices \[.*'plaintext'"):
        ProtocolStack.from_dict({"name": "s", "tags": {"x": {"mechanism": "nope"}}})


def test_unknown_parameter_is_rejected():
    with pytest.raises(ConfigError, match="unknown parameter 'zzz'"):
        ProtocolStack.from_dict({"name": "s", "tags": {"x": {"mechanism": "plaintext", "params": {"zzz": 1}}}})


def test_missing_stack_names_shipped_ones():
    with pytest.raises(ConfigError, match="shipped protocol stacks: .*plaintext"):
        ProtocolStack.load("does-not-exist")


def test_check_tags_reports_every_unbound_tag():
    s = ProtocolStack.from_dict({"name": "s", "tags": {"a": {"mechanism": "plaintext"}}})
    with pytest.raises(ConfigError, match=r"(?s)'b' is not bound.*'c' is not bound"):
        s.check_tags({"a": ExchangeKind.AGGREGATE, "b": ExchangeKind.AGGREGATE, "c": ExchangeKind.BROADCAST})


def test_every_shipped_stack_is_named_like_its_file():
    """One name per stack: what results print is what --protocol takes."""
    for f in sorted(protocols_dir().glob("*.toml")):
        assert ProtocolStack.load(f).name == f.stem, f
