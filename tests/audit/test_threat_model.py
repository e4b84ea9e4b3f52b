"""Threat models: the shipped files load; every problem of a bad file is reported at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from securefg.audit.threat_model import Behaviour, ThreatModel, threat_models_dir
from securefg.errors import ConfigError

SHIPPED = ("curious_server", "curious_clients", "malicious_client")


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_threat_model_loads_with_budgets_on_its_attacks_metrics(name: str) -> None:
    tm = ThreatModel.load(name)
    assert tm.name == name and tm.source.endswith(f"{name}.toml")
    assert tm.attacks and all(a.budget is not None or a.margin is not None for a in tm.attacks)
    assert tm.assumptions
    d = tm.to_dict()
    assert d["adversary"]["parties"] == list(tm.adversary.parties)


def test_malicious_client_is_malicious_and_curious_ones_are_not() -> None:
    assert ThreatModel.load("malicious_client").adversary.behaviour is Behaviour.MALICIOUS
    assert ThreatModel.load("curious_server").adversary.behaviour is Behaviour.HONEST_BUT_CURIOUS
    assert ThreatModel.load("curious_server").adversary.includes_server


def test_a_bad_file_lists_every_problem_once_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("""
name = "bad"
colour = "red"
[adversary]
parties = ["server", "client/x"]
behaviour = "sneaky"
[side_knowledge]
aux_graphs = 1.5
[attacks.label_inference]
budget = { max_accuracy = 0.6 }
round = 3
[attacks.nope]
[attacks.update_poisoning]
budget = { max_accuracy_drop = 0.05 }
""")
    with pytest.raises(ConfigError, match="invalid threat model .*bad.toml") as info:
        ThreatModel.load(bad)
    msg = str(info.value)
    for expected in (
        "unknown top-level key 'colour'",
        "'client/x' is not a party id",
        "behaviour 'sneaky' is not one of",
        "aux_graphs must be a share in [0, 1)",
        "budget must be { max_auc = <number> }",
        "unknown parameter 'round'",
        "Could not resolve attack 'nope' among choices",
    ):
        assert expected in msg, expected
    assert msg.count("\n- ") == 7


def test_an_active_attack_needs_a_malicious_adversary() -> None:
    data = {"name": "x", "adversary": {"parties": ["client/0"], "behaviour": "honest-but-curious"},
            "attacks": {"update_poisoning": {}}}
    with pytest.raises(ConfigError, match="active attack and needs behaviour = \"malicious\""):
        ThreatModel.from_dict(data)


def test_the_same_attack_twice_under_different_keys() -> None:
    tm = ThreatModel.from_dict({
        "name": "x", "adversary": {"parties": ["client/0"], "behaviour": "malicious"},
        "attacks": {"flip": {"attack": "update_poisoning", "behaviour": "sign_flip"},
                    "boost": {"attack": "update_poisoning", "behaviour": "scale", "budget": {"max_accuracy_drop": 0.1}}},
    })
    assert [(a.key, a.attack, a.budget) for a in tm.attacks] == [("flip", "update_poisoning", None),
                                                                 ("boost", "update_poisoning", 0.1)]


def test_an_unknown_name_lists_the_shipped_threat_models() -> None:
    with pytest.raises(ConfigError, match=r"not found; shipped threat models: \['curious_clients'"):
        ThreatModel.load("no_such_model")
    assert (threat_models_dir() / "curious_server.toml").is_file()


def test_a_margin_budget_is_judged_over_chance_once_the_attack_ran(tmp_path: Path) -> None:
    from securefg.audit.report import AttackEntry

    path = tmp_path / "m.toml"
    path.write_text("""
name = "m"
[adversary]
parties = ["server"]
behaviour = "honest-but-curious"
[attacks.label_inference]
budget = { margin = 0.1 }
""")
    spec = ThreatModel.load(path).attacks[0]
    assert spec.budget is None and spec.margin == 0.1
    assert spec.budget_for(0.5) == pytest.approx(0.6) and spec.budget_for(None) is None
    # public knowledge reaches 0.8: 0.85 adds 0.05 (passes), 0.95 adds 0.15 (fails)
    assert AttackEntry.verdict(0.85, spec.budget_for(0.5), baseline=0.8, chance=0.5) is True
    assert AttackEntry.verdict(0.95, spec.budget_for(0.5), baseline=0.8, chance=0.5) is False
    assert ThreatModel.load(path).to_dict()["attacks"][0]["margin"] == 0.1


@pytest.mark.parametrize("budget", ["{ margin = -0.1 }", "{ margin = 0.1, max_auc = 0.6 }", "{ margin = nan }"])
def test_a_bad_margin_is_refused_naming_the_attack(tmp_path: Path, budget: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(f"""
name = "m"
[adversary]
parties = ["server"]
behaviour = "honest-but-curious"
[attacks.label_inference]
budget = {budget}
""")
    with pytest.raises(ConfigError, match="attacks.label_inference: budget"):
        ThreatModel.load(path)
