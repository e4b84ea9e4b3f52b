"""A stack's content hash, and a user stack that borrows a shipped stack's name."""

from __future__ import annotations

import re
from pathlib import Path

from securefg.protocol.stack import ProtocolStack
from securefg.protocol.stack_identity import SHIPPED_DIR, content_sha256, describe_identity, identify

SHIPPED = SHIPPED_DIR / "fedavg_secure_sum.toml"


def _plaintext_update(text: str) -> str:
    """The shipped fedavg_secure_sum file with the update travelling in plaintext."""
    head, _, rest = text.partition('[tags."fedavg/update"]')
    _, _, tail = rest.partition('[tags."fedavg/metrics"]')
    return head + '[tags."fedavg/update"]\nmechanism = "plaintext"\n\n[tags."fedavg/metrics"]' + tail


def test_a_user_stack_borrowing_a_shipped_name_is_marked_as_shadowing_it(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(_plaintext_update(SHIPPED.read_text()))
    stack = ProtocolStack.load(path)
    assert stack.name == "fedavg_secure_sum" and stack.binding_for("fedavg/update").mechanism == "plaintext"
    ident = identify(stack)
    assert (ident.shipped, ident.name_shadows_shipped, ident.shipped_as) == (False, True, None)
    assert re.fullmatch(r"[0-9a-f]{64}", ident.sha256) and ident.sha256 != content_sha256(ProtocolStack.load(SHIPPED))
    assert "NOT the shipped stack 'fedavg_secure_sum'" in describe_identity(ident.to_json())


def test_a_shipped_file_stem_is_a_name_too(tmp_path: Path) -> None:
    text = _plaintext_update(SHIPPED.read_text()).replace('name = "fedavg_secure_sum"', 'name = "fedavg_ckks"')
    (tmp_path / "x.toml").write_text(text)
    assert identify(ProtocolStack.load(tmp_path / "x.toml")).name_shadows_shipped


def test_a_verbatim_copy_elsewhere_is_the_shipped_stack(tmp_path: Path) -> None:
    (tmp_path / "copy.toml").write_text(SHIPPED.read_text())
    ident = identify(ProtocolStack.load(tmp_path / "copy.toml"))
    assert (ident.shipped, ident.name_shadows_shipped, ident.shipped_as) == (True, False, "fedavg_secure_sum")
    assert describe_identity(ident.to_json()) == ""


def test_the_hash_covers_content_not_layout_or_path() -> None:
    a = ProtocolStack.from_dict({"name": "s", "tags": {"x": {"mechanism": "plaintext"}, "y": {
        "mechanism": "secure_sum", "params": {"clip": 2.0, "bits": 64}}}}, source="a.toml")
    b = ProtocolStack.from_dict({"tags": {"y": {"params": {"bits": 64, "clip": 2.0}, "mechanism": "secure_sum"},
                                          "x": {"mechanism": "plaintext"}}, "name": "s"}, source="b.toml")
    c = ProtocolStack.from_dict({"name": "s", "tags": {"x": {"mechanism": "plaintext"}, "y": {
        "mechanism": "secure_sum", "params": {"clip": 4.0, "bits": 64}}}})
    assert content_sha256(a) == content_sha256(b) != content_sha256(c)


def test_a_new_name_neither_is_nor_shadows_a_shipped_stack() -> None:
    ident = identify(ProtocolStack.from_dict({"name": "my-own", "tags": {"*": {"mechanism": "plaintext"}}}))
    assert (ident.shipped, ident.name_shadows_shipped) == (False, False)
    assert describe_identity(ident.to_json()).startswith("user stack (sha256 ")


def test_every_shipped_stack_is_identified_as_itself() -> None:
    for path in sorted(SHIPPED_DIR.glob("*.toml")):
        ident = identify(ProtocolStack.load(path))
        assert (ident.shipped, ident.name_shadows_shipped, ident.shipped_as) == (True, False, path.stem)
