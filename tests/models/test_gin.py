import inspect

import pytest
import torch

from securefg.methods.base import MethodConfig
from securefg.models.gin import GIN


def _two_rings(sizes: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Disjoint cycles of the given sizes, one graph each, with constant features."""
    rows, cols, batch, offset = [], [], [], 0
    for g, n in enumerate(sizes):
        for i in range(n):
            j = (i + 1) % n
            rows += [offset + i, offset + j]
            cols += [offset + j, offset + i]
        batch += [g] * n
        offset += n
    return torch.ones(offset, 3), torch.tensor([rows, cols]), torch.tensor(batch)


def test_gin_outputs_one_row_of_logits_per_graph() -> None:
    x, ei, batch = _two_rings((5, 9))
    out = GIN(3, 4).eval()(x, ei, batch)
    assert out.shape == (2, 4) and torch.isfinite(out).all()


def test_sum_readout_sees_graph_size_and_mean_readout_does_not() -> None:
    # PROTEINS' classes differ mostly in size: that is why the graph tasks default to sum.
    x, ei, batch = _two_rings((5, 9))
    torch.manual_seed(0)
    summed = GIN(3, 2, pooling="sum").eval()(x, ei, batch)
    torch.manual_seed(0)
    mean = GIN(3, 2, pooling="mean").eval()(x, ei, batch)
    assert not torch.allclose(summed[0], summed[1])
    assert torch.allclose(mean[0], mean[1], atol=1e-6)


def test_dropout_is_active_only_in_training() -> None:
    x, ei, batch = _two_rings((6, 6))
    model = GIN(3, 2, dropout=0.5)
    model.eval()
    assert torch.equal(model(x, ei, batch), model(x, ei, batch))
    model.train()
    torch.manual_seed(1)
    a = model(x, ei, batch)
    assert not torch.equal(a, model(x, ei, batch))


def test_every_parameter_is_a_float_tensor_that_receives_a_gradient() -> None:
    x, ei, batch = _two_rings((4, 7))
    model = GIN(3, 2, pooling="sum")
    model(x, ei, batch).sum().backward()
    for name, p in model.named_parameters():
        assert p.is_floating_point() and p.grad is not None, name
    assert all(b.is_floating_point() for b in model.buffers())  # nothing for FedAvg/CKKS to special-case


@pytest.mark.parametrize("kwargs", [{"pooling": "max"}, {"num_layers": 0}])
def test_bad_configuration_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GIN(3, 2, **kwargs)


def test_default_readout_is_the_one_graph_runs_use() -> None:
    # A bare GIN(d, C) in a script or diagnostic must be the classifier the runs train.
    default = inspect.signature(GIN).parameters["pooling"].default
    assert default == MethodConfig.graph_pooling == "sum"
