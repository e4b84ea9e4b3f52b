"""The CLI explains itself: every flag has a help text with its default, every method and option is listed."""

from __future__ import annotations

import argparse

import pytest

from securefg.cli import main
from securefg.commands.option_list import accepted_options, option_docs, render_options
from securefg.commands.run_cmd import render_result
from securefg.methods.base import method_class
from securefg.methods.method_card import METHOD_CARDS


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    """Every ``securefg`` subcommand's parser (nested ones as ``reproduce cefgc``)."""
    from securefg.commands import (
        audit_cmd,
        datasets_cmd,
        partition_cmd,
        reproduce_cmd,
        run_cmd,
        summarize_cmd,
    )

    parser = argparse.ArgumentParser(prog="securefg")
    sub = parser.add_subparsers(dest="command")
    for mod in (run_cmd, datasets_cmd, partition_cmd, audit_cmd, summarize_cmd, reproduce_cmd):
        mod.register(sub)
    found: dict[str, argparse.ArgumentParser] = {}
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        for action in nested:
            found.update({f"{name} {n}": q for n, q in action.choices.items()})
        if not nested:
            found[name] = p
    return found


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_every_flag_says_what_it_does_and_its_default(command: str) -> None:
    parser = _subparsers()[command]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        flag = action.option_strings[-1]
        assert action.help and len(action.help) > 10, f"securefg {command} {flag} has no help text"
        silent_default = action.default in (None, False, [], argparse.SUPPRESS) or action.required
        if not silent_default and not isinstance(action, argparse._StoreConstAction):
            assert "default" in action.help, f"securefg {command} {flag}: the help does not give the default"


def test_run_help_lists_every_method_and_the_data_root(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["run", "--help"])
    out = capsys.readouterr().out
    method_help = " ".join(out.split("--method METHOD", 2)[2].split("--dataset DATASET")[0].split())
    assert stop.value.code == 0 and "..." not in method_help
    assert method_help.endswith(", ".join(METHOD_CARDS) + " (list below)"), method_help
    for card in METHOD_CARDS.values():
        assert f"  {card.name} " in out and card.default_stack in out
    assert "$SECUREFG_DATA" in out and "--list-options METHOD" in out
    assert "basic|star" not in out and "cefgc_plus" in out


@pytest.mark.parametrize("method", sorted(METHOD_CARDS))
def test_list_options_names_every_key_a_run_accepts(method: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["run", "--list-options", method])  # no --method/--dataset/--out needed, like --help
    out = capsys.readouterr().out
    assert stop.value.code == 0 and out == render_options(method) + "\n"
    for key in accepted_options(method):
        assert f"  {key}=" in out, key
    assert "patience=" in out


def test_every_option_of_the_methods_outside_fedstruct_is_described() -> None:
    """Descriptions come from each method's docstring; FedStruct's two edge-DP options point at its docs."""
    for name in METHOD_CARDS:
        missing = set(method_class(name).option_defaults) - set(option_docs(method_class(name)))
        expected = {"edge_dp_epsilon", "edge_dp_keep"} if name == "fedstruct" else set()
        assert missing <= expected, (name, missing)


def test_list_options_of_an_unknown_method_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["run", "--list-options", "fedavgg"])
    assert stop.value.code == 2 and "Could not resolve method 'fedavgg'" in capsys.readouterr().err


def test_an_unknown_option_lists_what_the_run_accepts(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--method", "fedavg", "--dataset", "csbm", "--clients", "2", "--rounds", "1",
                 "--option", "patiense=3", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "unknown option(s) ['patiense']" in err
    assert "'patience'" in err and "'robust'" in err and "'weighting'" in err and "--list-options fedavg" in err


def test_the_summary_names_the_model_behind_each_number() -> None:
    result = {"method": "fedavg", "dataset": "Cora", "partition": "metis", "clients": 10, "rounds": 5, "seed": 0,
              "protocol": "fedavg_secure_sum", "bytes_total": 1, "wire_bytes_total": 2, "communication_rounds": 3,
              "wall_seconds": 1.0, "metrics": {"test_acc": 0.6757, "best_round": 2, "global_model_test_acc": 0.1179,
                                               "majority_baseline_test_acc": 0.6758, "per_client": {}}}
    text = render_result(result)
    assert "test_acc" in text and "after that round's local training" in text
    assert "global_model_test_acc" in text and "broadcast in best_round, before local training" in text
    assert "most frequent training label" in text and "docs/metrics.md" in text
    assert "3 server-client flights" in text
