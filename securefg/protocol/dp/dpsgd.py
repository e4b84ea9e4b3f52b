"""DP-SGD on a client's local model through Opacus, for models that allow per-sample gradients.

DP-SGD (Abadi et al. 2016, https://arxiv.org/abs/1607.00133) clips each *example's* gradient
and adds noise to their sum. That is only sound when the loss of a batch is a sum of
independent per-example terms, each depending on its own row of the input alone:

* **Message passing breaks it.** In a GNN layer node :math:`v`'s output aggregates its
  neighbours' features, so one training node's data reaches the loss of every node within
  :math:`L` hops. The "per-sample" gradient of node :math:`v`'s loss is then not the whole
  influence of :math:`v`'s data, clipping it does not bound :math:`v`'s sensitivity, and the
  Opacus accountant's epsilon would not hold. Node-level DP for GNNs needs degree-bounded
  sampling and a different analysis (Daigavane et al. 2021, https://arxiv.org/abs/2111.15521).
  Graph-level tasks where each example is a whole graph are a different matter, but Opacus
  has no per-sample gradient rule for PyG's layers either.
* **BatchNorm breaks it** the same way: batch statistics mix the examples. Opacus'
  ``ModuleValidator.fix`` swaps it for GroupNorm.

So :func:`make_private` accepts models whose batch rows are independent (MLPs on node
features, decoupled models' post-propagation heads on precomputed features, the score networks
of per-graph generators once their BatchNorm is replaced) and raises
:class:`~securefg.errors.PerSampleGradientError` naming the offending modules otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import nn, optim
from torch.utils.data import DataLoader

from securefg.errors import PerSampleGradientError
from securefg.protocol.dp.accountant import Mode, PrivacyAccountant, Release, Unit

if TYPE_CHECKING:  # importing opacus takes seconds; the transforms do not need it
    from opacus import PrivacyEngine  # type: ignore[import-untyped]


@dataclass
class PrivateTraining:
    """The objects Opacus' ``PrivacyEngine.make_private`` returns, and the engine itself.

    Args:
        model (nn.Module): The wrapped model (computes per-sample gradients).
        optimizer (optim.Optimizer): The DP optimizer (clips and noises).
        data_loader (DataLoader): The Poisson-sampling loader.
        engine (PrivacyEngine): Holds the Opacus accountant of the local steps.
    """

    model: nn.Module
    optimizer: optim.Optimizer
    data_loader: DataLoader  # type: ignore[type-arg]
    engine: PrivacyEngine

    def record_into(self, accountant: PrivacyAccountant, *, subject: str, tag: str) -> None:
        """Copy the steps taken so far into ``accountant`` as example-level releases.

        Call it once, after local training (each call adds the engine's whole history).
        """
        for sigma, q, steps in self.engine.accountant.history:
            accountant.record(
                Release(subject, tag, Mode.DPSGD, sigma, sigma, q, int(steps), unit=Unit.EXAMPLE)
            )


def make_private(
    *,
    model: nn.Module,
    optimizer: optim.Optimizer,
    data_loader: DataLoader,  # type: ignore[type-arg]
    noise_multiplier: float,
    max_grad_norm: float,
    poisson_sampling: bool = True,
    accountant: str = "rdp",
) -> PrivateTraining:
    """Make local training example-level DP with Opacus (a thin ``PrivacyEngine`` wrapper).

    Args:
        model (nn.Module): The local model; its batch rows must be independent (module docs).
        optimizer (optim.Optimizer): Optimizer over ``model``'s parameters.
        data_loader (DataLoader): Loader of the local training examples.
        noise_multiplier (float): DP-SGD noise multiplier.
        max_grad_norm (float): Per-example gradient clip norm.
        poisson_sampling (bool): Poisson batches, as the accountant assumes. (default: ``True``)
        accountant (str): Opacus accountant for the engine. (default: ``"rdp"``)

    Returns:
        PrivateTraining: The wrapped model, optimizer, loader and engine.

    Raises:
        PerSampleGradientError: If ``model`` contains message-passing layers, BatchNorm or any
            other module Opacus cannot compute independent per-sample gradients for.
    """
    from opacus import PrivacyEngine
    from opacus.validators import ModuleValidator  # type: ignore[import-untyped]
    from opacus.validators.errors import UnsupportedModuleError  # type: ignore[import-untyped]

    problems = [
        f"{name or type(model).__name__}: {type(mod).__name__} is a message-passing layer; a node's "
        "data reaches its neighbours' losses, so per-node gradients are not independent"
        for name, mod in model.named_modules()
        if _is_message_passing(mod)
    ]
    problems += [str(err) for err in ModuleValidator.validate(model, strict=False)]
    if problems:
        raise PerSampleGradientError(_explain(model, problems))
    engine = PrivacyEngine(accountant=accountant)
    try:
        wrapped, dp_optimizer, loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            poisson_sampling=poisson_sampling,
        )
    except (UnsupportedModuleError, NotImplementedError) as exc:
        raise PerSampleGradientError(_explain(model, [str(exc)])) from exc
    return PrivateTraining(wrapped, dp_optimizer, loader, engine)


def _is_message_passing(module: nn.Module) -> bool:
    try:
        from torch_geometric.nn import MessagePassing  # type: ignore[import-untyped]
    except ImportError:  # without PyG there are no PyG layers to detect
        return False
    return isinstance(module, MessagePassing)


def _explain(model: nn.Module, problems: list[str]) -> str:
    return (
        f"cannot train {type(model).__name__} with per-sample-gradient DP-SGD:\n"
        + "\n".join(f"- {p}" for p in problems)
        + "\nDP-SGD needs each example's loss to depend on that example alone. Replace BatchNorm "
        "with GroupNorm (opacus.validators.ModuleValidator.fix), train a post-propagation head on "
        "precomputed features, or protect the update at client level with the 'dp_gaussian' "
        "transform instead"
    )
