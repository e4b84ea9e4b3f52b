"""FedSheafHN's client half: warm-up, the graph-level embedding, fine-tuning generated weights.

Everything here runs as one client on its own model and data; nothing crosses a party boundary.
The client model is the 2-layer GCN + linear head (:class:`~securefg.models.gcn.GCN`); both
convolutions are *generated* by the server's hypernetwork each round, the head ``clsif`` is the
client's own (``omega'_i``, never sent).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch_geometric.data import Data

from securefg.errors import InvalidInputError
from securefg.methods.training import propagation_index, train_node_epochs
from securefg.models.gcn import GCN

#: Parameter-name prefixes the hypernetwork generates (both GCN layers, weights and biases).
GENERATED_PREFIXES = ("conv1.", "conv2.")


def generated_shapes(model: GCN) -> dict[str, tuple[int, ...]]:
    """Name and shape of every generated parameter, in the model's order."""
    return {n: tuple(p.shape) for n, p in model.named_parameters() if n.startswith(GENERATED_PREFIXES)}


@torch.no_grad()
def client_embedding(model: GCN, data: Data, *, normalize: bool = True) -> torch.Tensor:
    """Eq. 2: ``x_i = mean_m conv2(G_i)_m`` over all nodes, in eval mode, as ``float64``.

    With ``normalize`` the vector is scaled to unit norm: the server's models see the direction
    only, and DP clipping at norm 1 then loses nothing (a sensitivity tight by construction).
    """
    model.eval()
    x = model.embed(data.x, propagation_index(data)).mean(dim=0).double().cpu()
    norm = torch.linalg.vector_norm(x)
    return x / norm if normalize and norm > 0 else x


@torch.no_grad()
def install_generated(model: GCN, generated: Mapping[str, torch.Tensor]) -> None:
    """Copy the received tensors into the GCN's convolution parameters (in place, so the
    client's optimizer keeps tracking them).

    Raises:
        InvalidInputError: A name, shape or non-finite value the client did not expect.
    """
    expected = generated_shapes(model)
    if set(generated) != set(expected):
        raise InvalidInputError(f"generated weights name {sorted(generated)}, expected {sorted(expected)}")
    params = dict(model.named_parameters())
    for name, t in generated.items():
        if tuple(t.shape) != expected[name]:
            raise InvalidInputError(f"generated {name} has shape {tuple(t.shape)}, expected {expected[name]}")
        if not bool(torch.isfinite(t).all()):
            raise InvalidInputError(f"generated {name} holds NaN or infinite values")
        params[name].copy_(t.to(params[name].device, params[name].dtype))


def fine_tune(
    model: GCN, optimizer: torch.optim.Optimizer, data: Data, generated: Mapping[str, torch.Tensor], *, epochs: int
) -> dict[str, torch.Tensor]:
    """Algorithm 1, client lines 6-8: train ``f(G_i; omega~_i, omega'_i)`` for ``epochs`` epochs.

    Returns:
        ``Delta omega~_i = omega~_i^{(T_c)} - omega~_i`` (the paper's definition), ``float32`` on CPU.
    """
    install_generated(model, generated)
    start = {n: t.detach().to(torch.float32).cpu().clone() for n, t in generated.items()}
    train_node_epochs(model, optimizer, data, epochs)
    params = dict(model.named_parameters())
    return {n: params[n].detach().float().cpu() - start[n] for n in start}
