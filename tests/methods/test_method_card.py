"""The method cards (read by the CLI before torch is imported) agree with the registered methods."""

from __future__ import annotations

from pathlib import Path

import pytest

from securefg.errors import ConfigError
from securefg.methods.base import available_methods, method_class
from securefg.methods.method_card import METHOD_CARDS, method_card

REPO = Path(__file__).resolve().parents[2]


def test_every_registered_method_has_a_card_that_matches_it() -> None:
    # other test packages register stand-ins, and the attacks register malicious variants
    # ("cefgc+sign_flip10@0") at run time: only the methods securefg.methods defines have cards
    built_in = sorted(n for n in available_methods() if method_class(n).__module__.startswith("securefg.methods."))
    assert sorted(METHOD_CARDS) == built_in
    for name, card in METHOD_CARDS.items():
        cls = method_class(name)
        assert card.default_stack == cls.default_stack, name
        assert set(card.tasks) == set(cls.tasks), name
        assert (REPO / card.docs).is_file(), card.docs
        assert (REPO / "protocols" / f"{card.default_stack}.toml").is_file()


def test_every_method_is_in_the_readme_table() -> None:
    table = (REPO / "README.md").read_text().split("## Methods", 1)[1].split("\n## ", 1)[0]
    for name in METHOD_CARDS:
        assert f"`{name}`" in table, name


def test_names_resolve_like_the_registry_and_unknown_ones_list_the_choices() -> None:
    assert method_card("FedAvg").name == "fedavg" and method_card("cefgc-plus").name == "cefgc_plus"
    with pytest.raises(ConfigError, match=r"Could not resolve method 'x' among choices \['cefgc'"):
        method_card("x")
