"""``examples/cefgc_client_breakdown.py``: subset averages and the per-dataset audit of a CeFGC run."""

import pytest
import torch

from securefg.methods.label_groups import LabelGroups

FAST = ["diffusion_epochs=2", "langevin_steps=2", "gnn_epochs=2", "max_nodes=24", "synthetic_ratio=0.5"]


def test_uniform_mean_is_the_plain_mean_of_the_listed_clients(load_example) -> None:
    ex = load_example("cefgc_client_breakdown")
    states = {"a": {"w": torch.tensor([1.0, 2.0])}, "b": {"w": torch.tensor([3.0, 6.0])}, "c": {"w": torch.tensor([9.0, 9.0])}}
    assert torch.equal(ex.uniform_mean(states, ["a", "b"])["w"], torch.tensor([2.0, 4.0]))


def test_real_owner_mean_takes_each_head_over_its_holders_and_the_trunk_over_all(load_example) -> None:
    ex = load_example("cefgc_client_breakdown")
    groups = LabelGroups(((0, 2), (2, 3)), ("A", "B"))
    states = {c: {"trunk.weight": torch.full((2,), v), "classifier.weight": torch.full((3, 1), v), "classifier.bias": torch.full((3,), v)}
              for c, v in (("a", 1.0), ("b", 3.0), ("c", 8.0))}
    real = {"a": torch.tensor([True, False]), "b": torch.tensor([True, False]), "c": torch.tensor([False, True])}
    out = ex.real_owner_mean(states, real, groups)
    assert torch.allclose(out["trunk.weight"], torch.full((2,), 4.0))  # (1 + 3 + 8) / 3
    assert torch.allclose(out["classifier.weight"].flatten(), torch.tensor([2.0, 2.0, 8.0]))  # A: a and b; B: c only
    assert out["classifier.bias"].dtype == torch.float32


def test_the_audit_runs_a_two_dataset_cell_and_its_all_client_average_is_the_run(load_example, tmp_path) -> None:
    ex = load_example("cefgc_client_breakdown")
    report = ex.main(["--method", "cefgc", "--dataset", "synthetic+synthetic-graphs", "--clients", "2", "--seed", "0",
                      "--out", str(tmp_path), *[a for o in FAST for a in ("--option", o)]])
    holds = [row["real_data_of"] for row in report["clients"].values()]
    assert holds == [["synthetic"], ["synthetic"], ["synthetic-graphs"], ["synthetic-graphs"]]
    averages = report["averages"]
    assert set(averages) == {"holders of synthetic", "holders of synthetic-graphs", "all clients (the run's global model)",
                             "heads over real-data holders, trunk over all"}  # "all but A" is "holders of B": once
    assert averages["all clients (the run's global model)"] == {k: round(v, 4) for k, v in report["run_auc_by_dataset"].items()}
    assert (tmp_path / "breakdown.json").is_file() and (tmp_path / "result.json").is_file()


def test_a_single_dataset_run_is_refused(load_example) -> None:
    ex = load_example("cefgc_client_breakdown")

    class OneHead:  # a method whose task has one head
        task = type("Task", (), {"label_groups": None})

    with pytest.raises(ValueError, match="several datasets"):
        ex.breakdown(OneHead(), fed=None)
