import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_geometric.nn import GCNConv

from securefg.errors import PerSampleGradientError
from securefg.protocol.dp.accountant import PrivacyAccountant, Unit
from securefg.protocol.dp.dpsgd import make_private


def _loader(n=64):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, 5, generator=g), torch.randint(0, 2, (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=16)


class _GCN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = GCNConv(5, 2)


def test_make_private_trains_and_records_example_level_releases():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = make_private(
        model=model, optimizer=opt, data_loader=_loader(), noise_multiplier=1.1, max_grad_norm=1.0
    )
    steps = 0
    for x, y in pt.data_loader:
        steps += 1
        pt.optimizer.zero_grad()
        nn.functional.cross_entropy(pt.model(x), y).backward()
        pt.optimizer.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    acc = PrivacyAccountant()
    pt.record_into(acc, subject="client/0", tag="local/train")
    (rel,) = acc.releases()
    assert (rel.unit, rel.noise_multiplier, rel.sample_rate) == (Unit.EXAMPLE, 1.1, 16 / 64)
    assert rel.steps == steps
    assert acc.epsilon("client/0", delta=1e-5, unit=Unit.EXAMPLE) == pytest.approx(
        pt.engine.get_epsilon(1e-5)
    )


def test_message_passing_model_is_rejected_with_the_reason():
    model = _GCN()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(
        PerSampleGradientError, match="conv: GCNConv is a message-passing layer.*not independent"
    ):
        make_private(
            model=model, optimizer=opt, data_loader=_loader(), noise_multiplier=1.0, max_grad_norm=1.0
        )


def test_batchnorm_model_is_rejected_and_the_fix_is_named():
    model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(PerSampleGradientError, match=r"(?s)BatchNorm.*ModuleValidator\.fix"):
        make_private(
            model=model, optimizer=opt, data_loader=_loader(), noise_multiplier=1.0, max_grad_norm=1.0
        )
