"""Average each dataset's head over the clients that hold that dataset (owner-only averaging).

With per-dataset heads (:mod:`securefg.methods.label_groups`) every client carries every head,
but it trains only the heads of the datasets it holds. The others it never trains; Adam's
weight decay only shrinks them. A plain average mixes those untouched copies in, so a head held
by 3 of 12 clients moves at a quarter of its owners' pace and is pulled toward zero. GCFL keeps
its heads local; with one global model the equivalent is to average dataset g's head rows over
the clients that hold g, and the shared trunk over all clients.

This runs as one protected ``aggregate`` with ``mean=False``, so it works over every sum
mechanism (plaintext, SecAgg+, CKKS): client k sends ``w_k x_k`` with the rows of its unowned
heads zeroed, and, as side inputs summed like the FedAvg weight (outside clipping and DP
noise), ``w_k [k holds g]`` for every dataset g and ``w_k`` itself; the server divides. What the
server learns beyond the averages is the weighted number of clients holding each dataset. A
head nobody held this round keeps the fallback the caller passes (the current global rows).
Under central DP a head's rows are divided by its owners' weight rather than by all clients',
so their noise is larger by that ratio.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch_geometric.data import Data

from securefg.errors import ConfigError, InvalidInputError
from securefg.federation.program.context import ClientContext, ServerContext
from securefg.methods.label_groups import LabelGroups
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack

#: Payload key of the owner weights: one per dataset, then the client's weight.
OWNERS_KEY = "head_owners"
#: The GIN's output layer (securefg.models.gin.GIN.classifier): its rows are the heads.
HEAD_PREFIX = "classifier"
#: Below this summed owner weight a head counts as unowned. Weights are 1 (uniform) or a
#: training-set size, so any real owner contributes at least 1.
MIN_OWNER_WEIGHT = 0.5


def owned_groups(groups: LabelGroups, graphs: Iterable[Data]) -> torch.Tensor:
    """Which datasets appear among ``graphs``' labels (bool, one per dataset)."""
    labels = [g.y.view(-1) for g in graphs]
    owned = torch.zeros(len(groups.bounds), dtype=torch.bool)
    if labels:
        owned[groups.group_of(torch.cat(labels)).unique()] = True
    return owned


def _head_keys(state: Mapping[str, torch.Tensor], groups: LabelGroups) -> list[str]:
    keys = [k for k in state if k.startswith(HEAD_PREFIX + ".")]
    if not keys or any(state[k].size(0) != groups.num_classes for k in keys):
        raise ConfigError(f"owner-only head averaging needs a {HEAD_PREFIX!r} layer with {groups.num_classes} "
                          f"output rows; the model has {[(k, tuple(state[k].shape)) for k in keys]}")
    return keys


def owner_payload(state: Mapping[str, torch.Tensor], groups: LabelGroups, owned: torch.Tensor,
                  weight: float = 1.0) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``state`` with the rows of unowned heads zeroed, and the owner weights.

    Returns:
        (the masked state, ``{OWNERS_KEY: weight * [owned..., 1]}``): the aggregate's input
        (weighted by ``weight`` there) and its side input.

    Raises:
        InvalidInputError: ``owned`` is not one flag per dataset, or ``weight`` is not positive.
    """
    if owned.dtype != torch.bool or owned.shape != (len(groups.bounds),):
        raise InvalidInputError(f"owned must be {len(groups.bounds)} booleans, got {owned.dtype} {tuple(owned.shape)}")
    if not weight > 0:
        raise InvalidInputError(f"owner weight must be > 0, got {weight}")
    out = {k: v.double().clone() for k, v in state.items()}
    for k in _head_keys(state, groups):
        for g, (start, stop) in enumerate(groups.bounds):
            if not owned[g]:
                out[k][start:stop] = 0.0
    owners = torch.cat([owned.double() * weight, torch.tensor([weight], dtype=torch.float64)])
    return out, {OWNERS_KEY: owners}


def owner_mean(total: Mapping[str, torch.Tensor], groups: LabelGroups,
               fallback: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """The owner-only average from the summed :func:`owner_payload` s (weighted states and
    owner weights side by side, as ``srv.aggregate(..., mean=False, weighted=True)`` returns them).

    The trunk is divided by the total weight, each head by its owners' weight. A head with no
    owner takes ``fallback``'s rows (zeros without one: the right value for averaged *updates*).

    Raises:
        InvalidInputError: No owner weight in ``total``, or a total weight that is not positive.
    """
    if OWNERS_KEY not in total or total[OWNERS_KEY].numel() != len(groups.bounds) + 1:
        raise InvalidInputError(f"the summed payload has no {OWNERS_KEY!r} of {len(groups.bounds) + 1} entries")
    owners = total[OWNERS_KEY].double()
    wsum = float(owners[-1])
    if not wsum >= MIN_OWNER_WEIGHT:
        raise InvalidInputError(f"total weight of the contributing clients is {wsum}")
    out = {k: v.double() / wsum for k, v in total.items() if k != OWNERS_KEY}
    for k in _head_keys(out, groups):
        for g, (start, stop) in enumerate(groups.bounds):
            if float(owners[g]) >= MIN_OWNER_WEIGHT:
                out[k][start:stop] = total[k][start:stop].double() / float(owners[g])
            else:
                out[k][start:stop] = 0.0 if fallback is None else fallback[k][start:stop].double()
    return out


def require_sum(stack: ProtocolStack, tag: str) -> None:
    """Check, before any training, that ``tag``'s aggregate returns the sum owner averaging divides.

    Raises:
        ConfigError: The mechanism returns another statistic (a trimmed mean would cut the owner
            weights along with the values); use ``--option head_average=all``.
    """
    mechanism = stack.resolve(tag, ExchangeKind.AGGREGATE).mechanism
    if not mechanism.returns_sum:
        raise ConfigError(f"tag {tag!r}: mechanism {mechanism.name!r} does not return a sum, which owner-only "
                          "head averaging divides; use --option head_average=all")


def contribute_by_owner(cli: ClientContext, tag: str, update: Mapping[str, torch.Tensor], groups: LabelGroups,
                        owned: torch.Tensor, *, weight: float | None = None) -> None:
    """A client program's input to :func:`aggregate_owned`: unowned heads zeroed, owner weights
    as side counts."""
    w = 1.0 if weight is None else float(weight)
    payload, side = owner_payload(update, groups, owned, w)
    cli.contribute(tag, payload, weight=weight, side=side)


def aggregate_owned(srv: ServerContext, tag: str, groups: LabelGroups, *, clients: Iterable[str] | None = None,
                    fallback: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """The server program's half: the weighted mean of :func:`contribute_by_owner` inputs, each
    head over its owners.

    Raises:
        ConfigError: ``tag``'s mechanism does not return a sum (:func:`require_sum`).
    """
    require_sum(srv.exchange.stack, tag)
    return owner_mean(srv.aggregate(tag, clients=clients, mean=False, weighted=True), groups, fallback)


__all__ = ["OWNERS_KEY", "aggregate_owned", "contribute_by_owner", "owned_groups", "owner_mean", "owner_payload", "require_sum"]
