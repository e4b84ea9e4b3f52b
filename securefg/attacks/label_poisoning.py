r"""Malicious variants that train on shifted labels, then shape the upload (the new poisoning attacks).

A malicious client relabels its own training data by a cyclic shift (class ``c`` becomes
``c + shift mod C``; Tolpegin et al., "Data Poisoning Attacks Against Federated Learning
Systems", ESORICS 2020, https://arxiv.org/abs/2007.08432), computes its update on that data
with the honest code, and then hands ``shape(update)`` to the exchange: unchanged (label
flipping), boosted (model replacement) or rescaled to a norm (norm-bounded poisoning). Only
the malicious client's own copy of its own data changes: nothing reaches another party except
through the exchange.

FedAvg-family methods (FedAvg, FedProx, FedSGD) run the client step as ``handle_train``: the
labels are swapped for the duration of that call. FedStruct-B computes gradients from the
client's :class:`~securefg.models.fedstruct.ClientBatch`; the variant swaps its labels after
setup and shapes the gradient upload between the client and the mechanism.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from securefg.attacks.malicious import deviating_clients, malicious_method
from securefg.methods.base import Method, method_class

Shape = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]


def shifted(y: torch.Tensor, shift: int, num_classes: int) -> torch.Tensor:
    """``(y + shift) mod C`` for class labels (a new tensor; ``y`` unchanged)."""
    return (y.long() + int(shift)) % int(num_classes)


@contextmanager
def flipped_labels(client: Any, shift: int, num_classes: int) -> Iterator[None]:
    """Within the block, ``client``'s own training labels are shifted (node data or graph lists)."""
    data = client.state["data"]
    saved: list[tuple[Any, torch.Tensor]] = []
    targets = [data] if hasattr(data, "y") else list(data.get("train", []))
    for d in targets:
        saved.append((d, d.y))
        d.y = shifted(d.y, shift, num_classes).to(d.y.dtype)
    try:
        yield
    finally:
        for d, y in saved:
            d.y = y


def label_poisoned_method(base: str, label: str, members: Iterable[str], *, shift: int, num_classes: int,
                          shape: Shape, tag: str) -> str:
    """Register ``base`` with ``members`` training on shifted labels and uploading ``shape(update)``.

    Args:
        base (str): Registered method (FedAvg family, or ``"fedstruct"`` variant B).
        label (str): Variant suffix.
        members (Iterable[str]): Malicious client ids.
        shift (int): Label shift.
        num_classes (int): ``C``.
        shape (Callable): Applied to the malicious update (named tensors) before the exchange.
        tag (str): FedStruct's gradient upload tag (ignored for the FedAvg family).

    Returns:
        str: The variant's registered name.
    """
    mine = frozenset(members)
    bcls = method_class(base)
    if hasattr(bcls, "handle_train"):
        def train(honest: Any, method: Any, client: Any, global_state: Any) -> Any:
            with flipped_labels(client, shift, num_classes):
                update, weight = honest(method, client, global_state)
            return shape(update), weight

        return malicious_method(base, label, mine, {"handle_train": train})

    def _shift_batch(st: dict[str, Any], pid: str) -> None:
        batch = st.get("batch")
        if batch is None:
            from securefg.errors import ConfigError

            raise ConfigError(f"{base}: label poisoning needs FedStruct variant B (not hardened): "
                              f"{pid} holds no training batch")
        st["batch"] = dataclasses.replace(batch, y=shifted(batch.y, shift, num_classes).to(batch.y.dtype))

    def setup_client(self: Method, party: Any, index: int) -> None:
        bcls.setup_client(self, party, index)
        settings = getattr(self, "settings", None)
        if party.pid in mine and settings is not None and (settings.variant != "B" or settings.hardened):
            _shift_batch(party.state, party.pid)  # no batch in A / hardened: refused, named

    def on_nsf_assemble(self: Method, cli: Any) -> None:
        # the training batch is built once the relayed NSF rows are assembled (party programs)
        bcls.on_nsf_assemble(self, cli)  # type: ignore[attr-defined]
        if cli.pid in mine:
            _shift_batch(cli.state, cli.pid)

    return deviating_clients(bcls, label, mine, [("aggregate", tag)], lambda x: shape(dict(x)),
                             what=f"on shifted labels ({label})",
                             extra={"setup_client": setup_client, "on_nsf_assemble": on_nsf_assemble})


def scaled_to_norm(update: dict[str, torch.Tensor], norm: float) -> dict[str, torch.Tensor]:
    """``update`` rescaled so that its global L2 norm is ``norm`` (zero stays zero)."""
    current = float(torch.sqrt(sum((v.double() ** 2).sum() for v in update.values())))
    f = norm / current if current > 0 else 0.0
    return {k: v * f for k, v in update.items()}


__all__ = ["flipped_labels", "label_poisoned_method", "scaled_to_norm", "shifted"]
