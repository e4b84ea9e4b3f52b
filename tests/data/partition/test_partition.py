import json
from pathlib import Path

import pytest
import torch

from securefg.data.partition import Partition
from securefg.errors import InvalidInputError


def _overlapping() -> Partition:
    return Partition.from_parts(
        [torch.tensor([3, 0, 1]), torch.tensor([1, 2]), torch.tensor([], dtype=torch.long)],
        num_items=5,
        name="toy",
        params={"seed": 1, "ratios": (0.5, 0.5)},
        masks={"train": torch.tensor([True, False, True, False, False])},
    )


def test_from_assignment_matches_from_parts() -> None:
    assignment = torch.tensor([2, 0, -1, 0, 1, 2])
    a = Partition.from_assignment(assignment, num_parts=3, name="x")
    b = Partition.from_parts(
        [torch.tensor([1, 3]), torch.tensor([4]), torch.tensor([0, 5])], num_items=6, name="x"
    )
    assert a == b
    assert torch.equal(a.assignment(), assignment)
    assert a.sizes().tolist() == [2, 1, 2]


def test_parts_are_sorted_and_overlap_is_detected() -> None:
    p = _overlapping()
    assert p.part(0).tolist() == [0, 1, 3]
    assert p.membership().tolist() == [1, 2, 1, 1, 0]
    assert not p.is_disjoint
    assert repr(p) == "Partition(toy, num_parts=3, num_items=5, overlapping)"
    with pytest.raises(InvalidInputError, match="overlaps, so items have no single owner"):
        p.assignment()


def test_params_are_normalised_to_json() -> None:
    assert _overlapping().params == {"seed": 1, "ratios": [0.5, 0.5]}
    with pytest.raises(InvalidInputError, match="JSON-compatible"):
        Partition.from_parts([torch.tensor([0])], num_items=1, name="x", params={"t": torch.zeros(1)})


def test_save_load_round_trip_is_plain_json(tmp_path: Path) -> None:
    p = _overlapping()
    path = p.save(tmp_path / "sub" / "toy.json")
    obj = json.loads(path.read_text())  # plain JSON: no pickle anywhere
    assert obj["format"] == "securefg.partition" and obj["masks"] == {"train": [0, 2]}
    q = Partition.load(path)
    assert q == p and q is not p
    assert torch.equal(q.masks["train"], p.masks["train"])


def test_load_rejects_foreign_or_corrupt_files(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(InvalidInputError, match="not a securefg partition"):
        Partition.load(path)
    obj = _overlapping().to_dict()
    obj["index"][0] = 99
    path.write_text(json.dumps(obj))
    with pytest.raises(InvalidInputError, match=r"ids outside \[0, 5\)"):
        Partition.load(path)


def test_inconsistent_fields_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match="end at len"):
        Partition("x", "node", 3, torch.tensor([0, 2]), torch.tensor([0]))
    with pytest.raises(InvalidInputError, match="level must be"):
        Partition("x", "edge", 3, torch.tensor([0, 1]), torch.tensor([0]))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="sorted and duplicate-free"):
        Partition("x", "node", 3, torch.tensor([0, 2, 3]), torch.tensor([1, 0, 0]))
    Partition(
        "x", "node", 3, torch.tensor([0, 2, 3]), torch.tensor([0, 1, 0])
    )  # repeats across parts are fine
    with pytest.raises(InvalidInputError, match="num_parts=2"):
        Partition.from_assignment(torch.tensor([0, 2]), num_parts=2, name="x")
