"""The receiver-side screen of FedStruct-B's relayed NSF rows (securefg.methods.fedstruct.nsf_screen)."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import ProtocolError
from securefg.federation.codec import encode_tensors
from securefg.methods.fedstruct.nsf_screen import NSF_NORM_FACTOR, MalformedNSFError, screened_table
from securefg.methods.fedstruct.structure import nsf_item

N, D = 12, 4


def rows_for(ids: list[int], scale: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(sum(ids) + len(ids))
    return torch.randn(len(ids), D, generator=gen) * scale


def item(ids: list[int], rows: torch.Tensor | None = None) -> bytes:
    return nsf_item(torch.tensor(ids), rows_for(ids) if rows is None else rows)


OWN = [0, 1, 2, 3]
PEERS = ([4, 5, 6, 7], [8, 9, 10, 11])


def test_honest_items_fill_the_table_untouched():
    table, screen = screened_table(torch.tensor(OWN), rows_for(OWN), [item(p) for p in PEERS], N)
    assert torch.equal(table[OWN], rows_for(OWN))
    for p in PEERS:
        assert torch.equal(table[p], rows_for(p))
    assert screen.as_dict() == {"items": 2, "items_dropped": 0, "ids_conflicting": 0, "rows_clipped": 0}


def test_an_item_claiming_the_receivers_own_nodes_is_dropped_whole():
    spoof = item(list(range(N)), torch.full((N, D), 100.0))
    table, screen = screened_table(torch.tensor(OWN), rows_for(OWN), [item(PEERS[0]), spoof, item(PEERS[1])], N)
    assert screen.items_dropped == 1 and screen.ids_conflicting == 0
    assert torch.equal(table[OWN], rows_for(OWN))
    for p in PEERS:
        assert torch.equal(table[p], rows_for(p))  # the honest rows, whatever the unpacking order


def test_a_node_claimed_twice_is_taken_from_neither():
    liar = item([5, 8], torch.full((2, D), 0.5))
    table, screen = screened_table(torch.tensor(OWN), rows_for(OWN), [item(PEERS[0]), item(PEERS[1]), liar], N)
    assert screen.ids_conflicting == 2 and screen.items_dropped == 0
    assert table[5].abs().sum() == 0 and table[8].abs().sum() == 0
    assert torch.equal(table[[4, 6, 7]], rows_for(PEERS[0])[[0, 2, 3]])


def test_out_of_scale_rows_are_clipped_to_the_honest_range():
    scaled = rows_for(PEERS[1], scale=100.0)
    table, screen = screened_table(torch.tensor(OWN), rows_for(OWN), [item(PEERS[0]), item(PEERS[1], scaled)], N)
    honest_norms = torch.cat([rows_for(OWN), rows_for(PEERS[0]), scaled]).norm(dim=1)
    bound = NSF_NORM_FACTOR * float(honest_norms.median())
    assert screen.rows_clipped == 4
    assert torch.allclose(table[PEERS[1]].norm(dim=1), torch.full((4,), bound))
    # the direction is kept, only the scale is bounded
    assert torch.allclose(torch.nn.functional.normalize(table[PEERS[1]]), torch.nn.functional.normalize(scaled))


@pytest.mark.parametrize(("blob", "match"), [
    (b"not a tensor bundle", "cannot be decoded"),
    (encode_tensors({"ids": torch.tensor([4]), "rows": torch.zeros(1, D)}), "expected keys"),
    (encode_tensors({"ids": torch.tensor([4.0]), "s": torch.zeros(1, D)}), "1-D integer"),
    (encode_tensors({"ids": torch.tensor([4, 5]), "s": torch.zeros(2, D + 1)}), r"must be \[2, 4\]"),
    (encode_tensors({"ids": torch.tensor([4, N]), "s": torch.zeros(2, D)}), "must lie in"),
    (encode_tensors({"ids": torch.tensor([4, 4]), "s": torch.zeros(2, D)}), "repeats a node id"),
    (encode_tensors({"ids": torch.tensor([4]), "s": torch.tensor([[float("nan")] * D])}), "NaN"),
])
def test_malformed_items_raise_a_typed_protocol_error(blob, match):
    with pytest.raises(MalformedNSFError, match=match) as err:
        screened_table(torch.tensor(OWN), rows_for(OWN), [item(PEERS[0]), blob], N)
    assert isinstance(err.value, ProtocolError)
    assert "item 1" in str(err.value)
