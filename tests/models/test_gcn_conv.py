import gc

import pytest
import torch
from torch_geometric.nn import GCNConv as PyGGCNConv
from torch_geometric.utils import to_torch_csr_tensor

from securefg.models import gcn_conv
from securefg.models.gcn import GCN
from securefg.models.gcn_conv import GCNConv


def _graph(n: int = 30, e: int = 120, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    return torch.unique(torch.cat([ei, ei.flip(0)], 1), dim=1)


def _pair(seed: int = 0) -> tuple[PyGGCNConv, GCNConv]:
    torch.manual_seed(seed)
    ref = PyGGCNConv(8, 5)
    ours = GCNConv(8, 5)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


@pytest.mark.parametrize("layout", ["edge_index", "csr"])
def test_output_and_gradients_are_bit_identical_to_pyg(layout: str) -> None:
    ref, ours = _pair()
    ei = _graph()
    adj = ei if layout == "edge_index" else to_torch_csr_tensor(ei.flip(0), size=(30, 30))
    x = torch.randn(30, 8)
    for _ in range(3):  # the later calls read the cache
        a, b = ref(x, adj), ours(x, adj)
        assert torch.equal(a, b)
        a.square().sum().backward()
        b.square().sum().backward()
    for p_ref, p_ours in zip(ref.parameters(), ours.parameters()):
        assert torch.equal(p_ref.grad, p_ours.grad)


def test_a_layer_called_on_another_graph_normalises_that_graph() -> None:
    """PyG's cached=True would reuse the first graph here; one model is scored on several graphs."""
    ref, ours = _pair()
    x = torch.randn(30, 8)
    for seed in (1, 2, 1):
        ei = _graph(seed=seed)
        assert torch.equal(ref(x, ei), ours(x, ei))


def test_an_edge_list_changed_in_place_is_normalised_again() -> None:
    ref, ours = _pair()
    x = torch.randn(30, 8)
    ei = _graph()
    ours(x, ei)
    ei[1, 0] = (ei[1, 0] + 1) % 30  # bumps ei._version
    assert torch.equal(ref(x, ei), ours(x, ei))


def test_another_node_count_or_dtype_gets_its_own_entry() -> None:
    ref, ours = _pair()
    ei = _graph()
    x = torch.randn(30, 8)
    ours(x, ei)
    x_more = torch.randn(35, 8)  # isolated nodes 30-34: other self-loops and degrees
    assert torch.equal(ref(x_more, ei), ours(x_more, ei))
    ref64, ours64 = ref.double(), ours.double()
    assert torch.equal(ref64(x.double(), ei), ours64(x.double(), ei))


def test_the_cache_entry_leaves_with_its_graph() -> None:
    _, ours = _pair()
    ei = _graph()
    ours(torch.randn(30, 8), ei)
    key = id(ei)
    assert key in gcn_conv._NORMALISED
    del ei
    gc.collect()
    assert key not in gcn_conv._NORMALISED


def test_explicit_edge_weights_and_inference_mode_take_pyg_s_path() -> None:
    ref, ours = _pair()
    ei, x = _graph(), torch.randn(30, 8)
    w = torch.rand(ei.size(1))
    assert torch.equal(ref(x, ei, w), ours(x, ei, w))
    with torch.inference_mode():
        assert torch.equal(ref(x, ei), ours(x, ei))
    assert id(ei) not in gcn_conv._NORMALISED  # nothing cached from inference mode
    out = ours(x, ei)  # and training afterwards still has a graph to differentiate
    out.sum().backward()
    assert ours.lin.weight.grad is not None


def test_gcn_state_dict_names_are_pyg_s() -> None:
    assert sorted(GCN(8, 3, hidden_channels=4).state_dict()) == [
        "clsif.bias", "clsif.weight", "conv1.bias", "conv1.lin.weight", "conv2.bias", "conv2.lin.weight"]
