"""FedSheafHN's server half: collaboration graph, sheaf diffusion, hypernetwork, its update.

The server holds the N client embeddings (keyed by pseudonym, never by client id under the
mailbox stack), builds the kNN collaboration graph over them, diffuses them with
:class:`~securefg.models.sheaf_diffusion.DiagSheafDiffusion` and generates every client's GCN
weights with :class:`~securefg.models.hypernetwork.AttentionHypernetwork` in one batched pass.

**Update (Eqs. 9-11).** The clients' feedback ``Delta_i = omega~_i^{(T_c)} - omega~_i`` is the
pseudo-gradient; the chain rule carries it through the hypernetwork into the sheaf model.
``feedback_sign = "pfedhn"`` (the default) back-propagates ``omega~_i - omega~_i^{(T_c)}``, so
Adam moves the outputs *towards* the fine-tuned weights (pFedHN's reference code);
``"paper"`` back-propagates ``Delta_i`` as written, which pushes them away (method notes A6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from securefg.errors import InvalidInputError, ProtocolError
from securefg.methods.optim import adam
from securefg.models.hypernetwork import AttentionHypernetwork
from securefg.models.sheaf_diffusion import DiagSheafDiffusion

FEEDBACK_SIGNS = ("pfedhn", "paper")
HN_OPTIMIZERS = ("adam", "sgd", "fedavg_bias")
HN_LR_SCHEDULES = ("constant", "cosine")


def knn_graph(x: torch.Tensor, k: int) -> torch.Tensor:
    """Symmetrised cosine kNN graph over the rows of ``x``, no self-loops, both directions.

    ``k <= 0`` or ``k >= N - 1`` gives the complete graph (the reference code's choice).
    """
    n = x.shape[0]
    if n < 2:
        return torch.zeros(2, 0, dtype=torch.long)
    if k <= 0 or k >= n - 1:
        adj = ~torch.eye(n, dtype=torch.bool)
    else:
        unit = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
        sim = unit @ unit.t()
        sim.fill_diagonal_(-float("inf"))
        nearest = sim.topk(k, dim=1).indices
        adj = torch.zeros(n, n, dtype=torch.bool)
        adj[torch.arange(n).repeat_interleave(k), nearest.reshape(-1)] = True
        adj = adj | adj.t()
    return adj.nonzero().t().contiguous()


class SheafHNServer:
    """The server's models, optimisers and the embeddings it holds (by pseudonym).

    Args:
        num_clients (int): N.
        embedding_dim (int): Size of a client embedding.
        target_shapes (Mapping[str, tuple[int, ...]]): The generated tensors.
        knn (int): Neighbours per client in the collaboration graph (0: complete graph).
        sheaf (dict): :class:`DiagSheafDiffusion` keyword arguments.
        hn_hidden (int): Hypernetwork width.
        hn_dropout (float): Hypernetwork dropout.
        hn_lr (float): Step size of the hypernetwork's optimiser.
        hn_optimizer (str): ``"adam"`` (the reference code) or ``"sgd"`` (pFedHN's paper). Under
            SGD the output bias moves by ``hn_lr * sum_i Delta_i``, so ``hn_lr = 1/N`` makes the
            shared part of the generated weights follow the clients' mean fine-tuned weights
            (a FedAvg step); Adam moves every coordinate by about ``hn_lr`` whatever the
            clients' updates. Plain SGD through the whole hypernetwork diverged on Computers
            (NaN feedback at ``hn_lr = 0.1``). ``"fedavg_bias"``: SGD with step ``1/N`` on the
            output bias only (the part every client shares, which then moves to the clients'
            mean fine-tuned weights each round, as FedAvg would) and Adam at ``hn_lr`` on the
            rest (the per-client part). (default: ``"adam"``)
        hn_lr_schedule (str): ``"constant"`` (the code) or ``"cosine"``: the hypernetwork's step
            decays from ``hn_lr`` towards 0 over ``rounds`` server updates, so the early rounds
            move fast and the late ones settle. (default: ``"constant"``)
        rounds (int): Server updates the schedule spans. (default: ``100``)
        sheaf_lr (float): Adam step of the sheaf model.
        sheaf_wd (float): Weight decay of the sheaf model.
        feedback_sign (str): ``"pfedhn"`` or ``"paper"`` (module docstring).
        standardize (bool): z-score every embedding coordinate over the clients before the
            sheaf model. Mean embeddings of different subgraphs are nearly parallel (they share
            the GCN that made them), so without it the hypernetwork sees near-identical rows and
            generates near-identical weights. (default: :obj:`True`)
        base (torch.Tensor, optional): Flat initial generated weights (the hypernetwork's
            output bias, see :class:`AttentionHypernetwork`). (default: :obj:`None`)
    """

    def __init__(self, *, num_clients: int, embedding_dim: int, target_shapes: Mapping[str, tuple[int, ...]], knn: int,
                 sheaf: Mapping[str, float | int], hn_hidden: int, hn_dropout: float, hn_lr: float, sheaf_lr: float,
                 sheaf_wd: float, feedback_sign: str, standardize: bool = True,
                 base: torch.Tensor | None = None, hn_optimizer: str = "adam",
                 hn_lr_schedule: str = "constant", rounds: int = 100) -> None:
        if feedback_sign not in FEEDBACK_SIGNS:
            raise InvalidInputError(f"feedback_sign must be one of {list(FEEDBACK_SIGNS)}, got {feedback_sign!r}")
        if hn_optimizer not in HN_OPTIMIZERS:
            raise InvalidInputError(f"hn_optimizer must be one of {list(HN_OPTIMIZERS)}, got {hn_optimizer!r}")
        if hn_lr_schedule not in HN_LR_SCHEDULES:
            raise InvalidInputError(f"hn_lr_schedule must be one of {list(HN_LR_SCHEDULES)}, got {hn_lr_schedule!r}")
        self.sheaf = DiagSheafDiffusion(embedding_dim, embedding_dim, **sheaf)  # type: ignore[arg-type]
        self.hn = AttentionHypernetwork(num_clients, embedding_dim, target_shapes, hidden_channels=hn_hidden,
                                        dropout=hn_dropout, base=base)
        self.sheaf_opt = adam(self.sheaf.parameters(), lr=sheaf_lr, weight_decay=sheaf_wd)
        self._bias_opt: torch.optim.Optimizer | None = None
        self.hn_opt = self._hn_optimizer(hn_optimizer, hn_lr, num_clients)
        self.hn_schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(self.hn_opt, T_max=max(1, rounds))
                            if hn_lr_schedule == "cosine" else None)
        self.num_clients, self.knn, self.sign, self.standardize = num_clients, knn, feedback_sign, standardize
        self.order: list[str] = []  # pseudonyms, in row order (fixed by the first embeddings)
        self.x0: torch.Tensor | None = None
        self.edge_index: torch.Tensor | None = None
        self._out: torch.Tensor | None = None
        #: The server's own record of the latest round (for leakage probes): what it generated
        #: and the feedback it read, both by pseudonym.
        self.last_generated: dict[str, dict[str, torch.Tensor]] = {}
        self.last_feedback: dict[str, dict[str, torch.Tensor]] = {}

    def _hn_optimizer(self, kind: str, lr: float, num_clients: int) -> torch.optim.Optimizer:
        if kind == "adam":
            return adam(self.hn.parameters(), lr=lr)
        if kind == "sgd":
            return torch.optim.SGD(self.hn.parameters(), lr=lr)
        rest = [p for p in self.hn.parameters() if p is not self.hn.out.bias]
        self._bias_opt = torch.optim.SGD([self.hn.out.bias], lr=1.0 / num_clients)
        return adam(rest, lr=lr)

    def set_embeddings(self, got: Mapping[str, torch.Tensor]) -> None:
        """Hold the received embeddings as ``X_0`` and rebuild the collaboration graph.

        Raises:
            ProtocolError: A set of pseudonyms other than the first round's, or the wrong count.
        """
        if not self.order:
            if len(got) != self.num_clients:
                raise ProtocolError(f"expected {self.num_clients} client embeddings, got {len(got)}")
            # Rows in a canonical order that does not depend on what the pseudonyms are (the
            # embeddings' own lexicographic order), so a stack that hides client ids trains the
            # very same models as plaintext: dropout masks are drawn per row.
            self.order = sorted(got, key=lambda nym: (got[nym].double().reshape(-1).tolist(), nym))
        elif set(got) != set(self.order):
            raise ProtocolError("embeddings arrived under pseudonyms other than the first round's")
        x0 = torch.stack([got[nym].float().reshape(-1) for nym in self.order])
        if self.standardize and x0.shape[0] > 1:
            x0 = (x0 - x0.mean(dim=0)) / x0.std(dim=0).clamp_min(1e-8)
        self.x0 = x0
        self.edge_index = knn_graph(self.x0, self.knn)

    @torch.no_grad()
    def set_base(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Start every client's generated weights from ``tensors`` (the hypernetwork's output bias).

        Raises:
            InvalidInputError: Names other than the generated ones, a wrong size or non-finite values.
        """
        row = self._row(tensors)
        if row.numel() != self.hn.num_outputs:
            raise InvalidInputError(f"the generator's starting weights hold {row.numel()} values, "
                                    f"expected {self.hn.num_outputs}")
        if not bool(torch.isfinite(row).all()):
            raise InvalidInputError("the generator's starting weights hold NaN or infinite values")
        self.hn.out.bias.copy_(row.to(self.hn.out.bias.dtype))

    def generate(self) -> dict[str, dict[str, torch.Tensor]]:
        """Eqs. 6-8 in training mode: every row's generated tensors, ``{pseudonym: tensors}``.

        The forward graph is kept for :meth:`update`.
        """
        if self.x0 is None or self.edge_index is None:
            raise ProtocolError("the server generates weights before it holds any client embedding")
        self.sheaf.train()
        self.hn.train()
        self._out = self.hn(self.sheaf(self.x0, self.edge_index))
        rows = self._out.detach()
        self.last_generated = {nym: {k: v.clone() for k, v in self.hn.split(rows[i]).items()}
                               for i, nym in enumerate(self.order)}
        return {nym: {k: v.clone() for k, v in t.items()} for nym, t in self.last_generated.items()}

    def update(self, feedback: Mapping[str, Mapping[str, torch.Tensor]]) -> float:
        """One optimiser step of both models from the clients' feedback; returns the feedback norm."""
        if self._out is None:
            raise ProtocolError("feedback arrived before any generated weights")
        missing = set(self.order) - set(feedback)
        if missing or len(feedback) != len(self.order):
            raise ProtocolError(f"feedback missing from {len(missing)} pseudonyms (or from unknown ones)")
        delta = torch.stack([self._row(feedback[nym]) for nym in self.order])
        if not bool(torch.isfinite(delta).all()):
            raise InvalidInputError("hypernetwork feedback holds NaN or infinite values")
        self.last_feedback = {nym: dict(feedback[nym]) for nym in self.order}
        grad = -delta if self.sign == "pfedhn" else delta
        self.sheaf_opt.zero_grad()
        self.hn_opt.zero_grad()
        if self._bias_opt is not None:
            self._bias_opt.zero_grad()
        self._out.backward(grad.to(self._out.dtype))
        self.hn_opt.step()
        if self._bias_opt is not None:
            self._bias_opt.step()
        if self.hn_schedule is not None:
            self.hn_schedule.step()
        self.sheaf_opt.step()
        self._out = None
        return float(delta.norm())

    def _row(self, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if set(tensors) != set(self.hn.shapes):
            raise InvalidInputError(f"feedback names {sorted(tensors)}, expected {sorted(self.hn.shapes)}")
        return torch.cat([tensors[k].reshape(-1).float() for k in self.hn.shapes])

    def attention_offdiag(self) -> float:
        """Largest off-diagonal attention weight: how far the server mixes clients' rows."""
        a = self.hn.attention.detach().clone()
        a.fill_diagonal_(0.0)
        return float(a.abs().max()) if a.numel() > 1 else 0.0

    def state_dicts(self) -> dict[str, object]:
        return {"sheaf": self.sheaf.state_dict(), "hn": self.hn.state_dict(),
                "sheaf_opt": self.sheaf_opt.state_dict(), "hn_opt": self.hn_opt.state_dict()}


def rows_of(order: Sequence[str], rows: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Stack per-pseudonym vectors in row order (tests and probes)."""
    return torch.stack([rows[n] for n in order])
