"""FedStruct's boundary-row layout for Algorithm 3 (option ``abar_rows``): same Ā, fewer bytes.

A METIS split of a small CSBM graph leaves most nodes with no neighbour in another client, so the
layout has rows to skip; the dense layout (``abar_rows=all``) is the reference.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from securefg.data.partition import MetisPartitioner, client_subgraphs
from securefg.data.synthetic import make_csbm
from securefg.errors import ConfigError, InvalidInputError, ProtocolError
from securefg.federation.envelope import Form
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.fedstruct.boundary import TAG_BOUNDARY, BoundaryLayout, boundary_mask, read_layouts
from securefg.methods.tasks import NodeTask
from securefg.models.fedstruct import NodeDirectory, split_graph
from tests.methods.test_fedstruct import abar_tolerance, central_abar, run

HOPS = 3


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def task() -> NodeTask:
    g = make_csbm(num_nodes=150, num_classes=3, num_features=12, p_in=0.06, p_out=0.01, seed=0)
    return NodeTask(clients=client_subgraphs(g, MetisPartitioner(3, seed=0)(g)), num_features=12, num_classes=3,
                    full_graph=g)


def directory_and_views(task: NodeTask) -> tuple[NodeDirectory, list[Any]]:
    assert task.full_graph is not None
    owner = torch.empty(int(task.full_graph.num_nodes), dtype=torch.long)
    for k, c in enumerate(task.clients):
        owner[c.global_id] = k
    directory = NodeDirectory(owner, len(task.clients))
    return directory, split_graph(task.full_graph.edge_index, directory)


def test_the_split_has_interior_rows_to_skip(task: NodeTask) -> None:
    _, views = directory_and_views(task)
    kept = sum(int(boundary_mask(v).sum()) for v in views)
    assert 0 < kept < 0.7 * sum(v.num_nodes for v in views)


@pytest.mark.parametrize("stack", ["plaintext", "fedstruct_secure"])
def test_boundary_rows_give_exactly_the_dense_abar_with_fewer_bytes(task: NodeTask, stack: str) -> None:
    _, dense, _ = run(task, stack, rounds=1, structure_hops=HOPS, abar_rows="all")
    _, lean, _ = run(task, stack, rounds=1, structure_hops=HOPS, abar_rows="boundary")
    ref = central_abar(task, HOPS)
    for k, pid in enumerate(lean.client_ids):
        got = lean.parties[pid].state["abar"]
        # the kept rows carry the same values and the skipped ones were exact zeros: bit for bit
        assert torch.equal(got, dense.parties[pid].state["abar"])
        assert torch.allclose(got, ref[task.clients[k].global_id], atol=abar_tolerance(stack), rtol=0)
    b_dense, b_lean = dense.transcript.bytes_by_tag(), lean.transcript.bytes_by_tag()
    assert TAG_BOUNDARY not in b_dense and b_lean[TAG_BOUNDARY] > 0
    assert b_lean["fedstruct/abar"] + b_lean[TAG_BOUNDARY] < 0.8 * b_dense["fedstruct/abar"]


def test_the_server_holds_only_sealed_layouts_and_masked_rows_under_the_default_stack(task: NodeTask) -> None:
    _, fed, _ = run(task, "fedstruct_secure", rounds=1, structure_hops=HOPS)
    to_server = {r.form for r in fed.transcript if r.tag == TAG_BOUNDARY and r.receiver == "server"}
    assert to_server == {Form.SEALED}
    for r in fed.transcript:
        if r.tag == "fedstruct/abar" and r.receiver == "server":
            assert r.form in (Form.MASKED, Form.KEYS, Form.SEALED)


def test_a_layout_item_round_trips_and_its_key_hides_the_rows_behind_the_salt(task: NodeTask) -> None:
    directory, views = directory_and_views(task)
    mine = BoundaryLayout.own(views[0], salt=bytes(16))
    back = BoundaryLayout.from_item(mine.item(), directory)
    assert back.receiver == 0 and torch.equal(back.mask, mine.mask) and back.key == mine.key
    assert BoundaryLayout.own(views[0], salt=bytes([1] * 16)).key != mine.key
    other = torch.zeros_like(mine.mask)
    other[: int(mine.mask.sum())] = True  # same count, other rows: another key, so the server refuses the mix
    assert not torch.equal(other, mine.mask)
    assert BoundaryLayout(0, other, bytes(16)).key != mine.key


def test_a_peer_refuses_a_layout_that_drops_a_node_it_has_an_edge_to(task: NodeTask) -> None:
    directory, views = directory_and_views(task)
    peer = next(v for v in views[1:] if bool((v.inter_owner == 0).any()))
    honest = BoundaryLayout.own(views[0], salt=bytes(16))
    honest.check_covers(peer, directory)
    dropped = honest.mask.clone()
    dropped[directory.local_index(peer.inter_edges[1, peer.inter_owner == 0][:1])] = False
    with pytest.raises(ProtocolError, match="omits its node"):
        BoundaryLayout(0, dropped, bytes(16)).check_covers(peer, directory)


def test_layout_items_are_checked_against_the_directory(task: NodeTask) -> None:
    directory, views = directory_and_views(task)
    items = [BoundaryLayout.own(v, salt=bytes(16)).item() for v in views]
    assert set(read_layouts(items[1:], directory, me=0)) == {1, 2}
    with pytest.raises(ProtocolError, match="no boundary layout from client"):
        read_layouts(items[1:2], directory, me=0)
    with pytest.raises(ProtocolError, match="came twice"):
        read_layouts(items, directory, me=0)
    short = BoundaryLayout(1, torch.ones(3, dtype=torch.bool), bytes(16)).item()
    with pytest.raises(ProtocolError, match="mask has 3 rows"):
        BoundaryLayout.from_item(short, directory)
    with pytest.raises(InvalidInputError, match="salt must be 16 bytes"):
        BoundaryLayout.own(views[0], salt=b"short")


def test_a_receiver_without_boundary_rows_keeps_one_zero_row() -> None:
    owner = torch.tensor([0, 0, 1, 1])
    edges = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])  # two components, one per client
    directory = NodeDirectory(owner, 2)
    layout = BoundaryLayout.own(split_graph(edges, directory)[0], salt=bytes(16))
    assert layout.rows.tolist() == [0]


def test_an_unknown_row_layout_is_a_config_error(task: NodeTask) -> None:
    with pytest.raises(ConfigError, match="abar_rows must be one of"):
        method_class("fedstruct")(task, MethodConfig(rounds=1, options={"abar_rows": "sparse"}))


def test_the_structure_link_attack_still_reads_single_plaintext_messages_in_the_boundary_layout(task: NodeTask) -> None:
    from tests.attacks.conftest import play, run_method, threat

    options = {"variant": "B", "nsf": "degree", "structure_hops": 2, "structure_dim": 16}
    result = run_method(task, "fedstruct", "plaintext", rounds=1, options=options, lr=0.002, weight_decay=5e-4)
    st = result["_federation"].parties["client/0"].state
    assert 0 < st["abar_boundary"].numel() < st["graph_view"].num_nodes  # rows were skipped
    out = play(threat(["client/0"], {"structure_link": {"pairs": 200}}), result, task)["structure_link"]
    assert out.status == "ran", out.reason
    assert out.outcome.details["source"] == "individual"
    assert out.outcome.value >= 0.9
