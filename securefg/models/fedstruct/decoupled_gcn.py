"""FedStruct's decoupled GCN (Sec. 5.2, Eqs. 16-20 and 23)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn
from torch_geometric.nn import MLP


class FedStructDGCN(nn.Module):
    r"""Decoupled GCN of `FedStruct <https://arxiv.org/abs/2402.19163>`_.

    A feature branch sees only the client's own subgraph; a structure branch sees the *global*
    graph, but only through :math:`\bar{A}` rows and node structure features (NSFs), never
    through other clients' features:

    .. math::
        z_v = \sum_{u \in V_i} \bar{a}^{(i)}_{vu} f_\theta(x_u)
            + \sum_{u \in V} \bar{a}_{vu}\, g_\phi(s_u), \qquad
        \hat{y}_v = \mathrm{softmax}(z_v)

    :math:`\bar{A}^{(i)}` is the L-hop matrix of the local subgraph, :math:`\bar{A}` the
    L_s-hop matrix of the global graph (Eqs. 16-17; :math:`\Theta_c` folded into the MLPs). With
    ``structure_hidden=None``, ``g`` is the identity (Eq. 23, Hop2Vec without MLP).

    Args:
        in_channels (int): Node feature width ``F``.
        structure_channels (int): NSF width ``d_s``.
        out_channels (int): Number of classes ``C``.
        feature_hidden (Sequence[int], optional): Hidden widths of ``f``. Table 4 (Cora):
            ``(64,)``. (default: :obj:`(64,)`)
        structure_hidden (Sequence[int], optional): Hidden widths of ``g``; :obj:`None` drops
            ``g``. Table 4 (Cora): ``(256,)``. (default: :obj:`(256,)`)
        dropout (float, optional): Dropout on hidden layers of both MLPs. (default: :obj:`0.5`)
        input_dropout (float, optional): Dropout on ``x`` before ``f``. (default: :obj:`0.0`)
        norm (str, optional): Hidden-layer norm of both MLPs (PyG name, e.g. ``"layer_norm"``,
            applied per node; the FedStruct code uses LayerNorm). (default: :obj:`None`)

    Shapes:
        - **input:** ``x`` :math:`(n_i, F)`, ``a_local`` :math:`(n_i, n_i)`, ``s``
          :math:`(m, d_s)`, ``abar_rows`` :math:`(n_i, m)` (columns = the ``m`` nodes of ``s``)
        - **output:** logits :math:`(n_i, C)`

    Raises:
        ValueError: If ``structure_hidden=None`` but ``structure_channels != out_channels``.
    """

    def __init__(
        self,
        in_channels: int,
        structure_channels: int,
        out_channels: int,
        *,
        feature_hidden: Sequence[int] = (64,),
        structure_hidden: Sequence[int] | None = (256,),
        dropout: float = 0.5,
        input_dropout: float = 0.0,
        norm: str | None = None,
    ) -> None:
        super().__init__()
        if structure_hidden is None and structure_channels != out_channels:
            raise ValueError(
                f"FedStructDGCN without a structure MLP (Eq. 23) needs structure_channels == "
                f"out_channels, got {structure_channels} != {out_channels}; pass "
                f"structure_hidden=(...) to keep g"
            )
        self.in_channels = in_channels
        self.structure_channels = structure_channels
        self.out_channels = out_channels
        self.input_dropout = nn.Dropout(input_dropout)
        # PyG's LayerNorm defaults to mode="graph" (statistics over all rows of the batch), which
        # would make a node's output depend on which other nodes share its batch: the per-client
        # and per-owner pieces of FedStruct-B would then differ from the central forward. Per-node
        # normalisation (torch's LayerNorm, as the FedStruct code) keeps every row independent.
        norm_kwargs = {"mode": "node"} if norm == "layer_norm" else None
        self.f = MLP([in_channels, *feature_hidden, out_channels], dropout=dropout, norm=norm,
                     norm_kwargs=norm_kwargs)
        self.g: nn.Module = (
            nn.Identity() if structure_hidden is None
            else MLP([structure_channels, *structure_hidden, out_channels], dropout=dropout,
                     norm=norm, norm_kwargs=norm_kwargs)
        )

    def reset_parameters(self) -> None:
        """Re-initialise both MLPs."""
        self.f.reset_parameters()
        if isinstance(self.g, MLP):
            self.g.reset_parameters()

    def feature_embeddings(self, x: Tensor, a_local: Tensor) -> Tensor:
        r"""Return :math:`\bar{A}^{(i)} f_\theta(X_i)`, computable from client i's data alone."""
        return a_local @ self.f(self.input_dropout(x))

    def transform_structure(self, s: Tensor) -> Tensor:
        r"""Return :math:`g_\phi(S)` row-wise (``[m, C]``); rows are independent nodes."""
        out: Tensor = self.g(s)
        return out

    def structure_embeddings(self, s: Tensor, abar_rows: Tensor) -> Tensor:
        r"""Return the NSEs :math:`\bar{A}^{[i]} g_\phi(S)` (``[n_i, C]``)."""
        return abar_rows @ self.transform_structure(s)

    def forward(self, x: Tensor, a_local: Tensor, s: Tensor, abar_rows: Tensor) -> Tensor:
        """Return logits ``z`` (``[n_i, C]``); the softmax lives in the loss."""
        return self.feature_embeddings(x, a_local) + self.structure_embeddings(s, abar_rows)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.structure_channels}, "
                f"{self.out_channels})")
