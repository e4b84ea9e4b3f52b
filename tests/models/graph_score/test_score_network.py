import pytest
import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.graph_score import EDPScoreConfig, EDPScoreNetwork
from securefg.models.graph_score.masks import pair_mask, symmetric_noise


def _noisy_batch(seed: int, sizes: list[int], n_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    flags = (torch.arange(n_max).unsqueeze(0) < torch.tensor(sizes).unsqueeze(1)).float()
    adj = symmetric_noise(flags, generator=gen, fold=True) + 0.3 * symmetric_noise(flags, generator=gen)
    return adj, flags


def _net(seed: int = 0, **kwargs: object) -> EDPScoreNetwork:
    net = EDPScoreNetwork(EDPScoreConfig(**kwargs))  # type: ignore[arg-type]
    net.reset_parameters(torch.Generator().manual_seed(seed))
    return net.eval()


def test_default_size_is_the_smallest_faithful_cpu_version() -> None:
    net = _net()
    assert sum(p.numel() for p in net.parameters()) == 17_993
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in net.modules())
    assert repr(net) == "EDPScoreNetwork(layers=3, node_features=8, channels=[2, 4, 4, 2], num_conditions=6)"


@pytest.mark.parametrize("common_neighbors", [False, True])
def test_score_is_permutation_equivariant(common_neighbors: bool) -> None:
    net = _net(common_neighbors=common_neighbors)
    adj, flags = _noisy_batch(1, [9, 9], 9)
    cond = torch.tensor([0, 5])
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(2))
    out = net(adj, flags, cond)
    out_perm = net(adj[:, perm][:, :, perm], flags[:, perm], cond)
    assert torch.allclose(out_perm, out[:, perm][:, :, perm], atol=1e-5)
    assert not torch.allclose(out_perm, out, atol=1e-3)  # the check is not vacuous


@pytest.mark.parametrize("common_neighbors", [False, True])
def test_score_is_symmetric_and_zero_on_diagonal_and_padding(common_neighbors: bool) -> None:
    net = _net(common_neighbors=common_neighbors)
    adj, flags = _noisy_batch(3, [4, 7, 6], 7)
    out = net(adj, flags, torch.tensor([1, 2, 3]))
    assert torch.allclose(out, out.transpose(1, 2), atol=1e-6)
    assert torch.equal(out * (1 - pair_mask(flags)), torch.zeros_like(out))
    assert (out[pair_mask(flags).bool()] != 0).all()


def test_padding_does_not_change_the_score_of_real_nodes() -> None:
    net = _net()
    adj, flags = _noisy_batch(4, [5], 5)
    padded_adj = torch.zeros(1, 9, 9)
    padded_adj[:, :5, :5] = adj
    padded_flags = torch.zeros(1, 9)
    padded_flags[:, :5] = 1
    cond = torch.tensor([2])
    assert torch.allclose(net(padded_adj, padded_flags, cond)[:, :5, :5], net(adj, flags, cond), atol=1e-6)


def test_each_graph_uses_its_own_condition() -> None:
    net = _net()
    for layer_param in net.parameters():  # make conditions distinguishable
        torch.nn.init.normal_(layer_param, 0.0, 0.3, generator=torch.Generator().manual_seed(5))
    adj, flags = _noisy_batch(5, [6], 6)
    two = net(adj.repeat(2, 1, 1), flags.repeat(2, 1), torch.tensor([0, 4]))
    assert torch.allclose(two[1], net(adj, flags, torch.tensor([4]))[0], atol=1e-6)
    assert not torch.allclose(two[0], two[1], atol=1e-4)


def test_same_generator_gives_same_initial_weights() -> None:
    a, b, c = _net(7), _net(7), _net(8)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters(), strict=True))


def test_score_network_rejects_condition_out_of_range() -> None:
    adj, flags = _noisy_batch(6, [4], 4)
    with pytest.raises(InvalidInputError, match=r"cond values must lie in \[0, 6\)"):
        _net()(adj, flags, torch.tensor([6]))


def test_score_network_rejects_misshapen_flags() -> None:
    adj, _ = _noisy_batch(6, [4], 4)
    with pytest.raises(InvalidInputError, match=r"flags must have shape \(1, 4\)"):
        _net()(adj, torch.ones(1, 5), torch.tensor([0]))


def test_config_lists_every_problem_at_once() -> None:
    with pytest.raises(ConfigError, match=r"(?s)channels\[0\] must be 2.*num_conditions=0"):
        EDPScoreConfig(channels=(3, 4), num_conditions=0)


def test_common_neighbors_only_widens_the_edge_mlps() -> None:
    plain, extended = _net(), _net(common_neighbors=True)
    extra = sum(p.numel() for p in extended.parameters()) - sum(p.numel() for p in plain.parameters())
    # first linear of each edge MLP gains C_in inputs x hidden 2*max(C_in, C_out): 2*8 + 4*8 + 4*8
    assert extra == 80
