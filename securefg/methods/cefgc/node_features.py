"""Node features for synthetic graphs: the sender's p(x | degree, class), shipped with its model.

EDP-GNN generates structure only, yet the receiving client's GIN reads node features (the
paper's Table 6: atom types for MUTAG, secondary-structure types for PROTEINS/ENZYMES, GCFL's
one-hot degree for IMDB). cefgc.md §6.1 item 2 leaves open how synthetic graphs get them; we
take decision (b), made sharper: the sender counts, over its own training graphs, how often
each feature category occurs at a node of each degree, per class, and ships that joint table
``P(degree, category | class)`` next to its score model. The receiver draws every synthetic
node's category from ``P(category | its degree, class)``, falling back to ``P(category |
class)`` for a degree the sender never saw. On one-hot degree features the table is the
identity, so the same code reproduces decision (a) exactly.

The table is a normalised float tensor, so a CeFGC+ pair average of two tables is again a
table (the average of the two joint distributions). It leaks to the receivers what it is: the
per-class feature-by-degree frequencies of the sender's graphs (nothing to the server, which
sees the package sealed or encrypted).

Only categorical (one-hot) features can be modelled this way; others raise a typed error
that names the alternative (``--option features=degree``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch_geometric.data import Data
from torch_geometric.utils import degree

from securefg.errors import ConfigError, InvalidInputError

#: Largest table a receiver accepts (rows x degrees x categories), against hostile packages.
MAX_TABLE_ENTRIES = 4_000_000


def node_degrees(graph: Data) -> torch.Tensor:
    """Undirected degree of every node (edges are stored in both directions)."""
    n = int(graph.num_nodes)
    if graph.edge_index is None:
        return torch.zeros(n, dtype=torch.long)
    return degree(graph.edge_index[0], n, dtype=torch.long)


def feature_categories(graph: Data) -> torch.Tensor:
    """The category of every node of a graph whose ``x`` is one-hot.

    Raises:
        ConfigError: ``x`` is missing or not one-hot (CeFGC cannot generate such features).
    """
    x = graph.x
    one_hot = x is not None and x.dim() == 2 and bool(((x == 0) | (x == 1)).all()) and bool((x.sum(dim=1) == 1).all())
    if not one_hot:
        raise ConfigError(
            "CeFGC gives synthetic graphs categorical node features drawn per degree, so every real node "
            "feature must be one-hot (TU node labels, one-hot degree); use --option features=degree for "
            "continuous attributes"
        )
    return x.argmax(dim=1)


class NodeFeatureTable:
    r"""Per-class joint frequencies :math:`P(d, f \mid y)` of node degree and feature category.

    Args:
        probs (torch.Tensor): :math:`(R, D + 1, F)`, non-negative; each row ``probs[r]`` sums to
            1 (or is all zero: no graphs of that row). ``R`` is 1 for a per-class model (CeFGC)
            or the number of classes (CeFGC*); degrees above ``D`` share the last slice.

    Raises:
        InvalidInputError: Wrong rank, too large, negative or non-finite entries.
    """

    def __init__(self, probs: torch.Tensor) -> None:
        if not isinstance(probs, torch.Tensor) or probs.dim() != 3 or min(probs.shape) < 1:
            shape = tuple(probs.shape) if isinstance(probs, torch.Tensor) else type(probs).__name__
            raise InvalidInputError(f"a node feature table is a non-empty (rows, degrees, categories) tensor, got {shape}")
        if probs.numel() > MAX_TABLE_ENTRIES:
            raise InvalidInputError(f"node feature table has {probs.numel()} entries, more than {MAX_TABLE_ENTRIES}")
        probs = probs.detach().to(torch.float64).cpu()
        if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
            raise InvalidInputError("node feature table entries must be finite and non-negative")
        self.probs = probs

    @property
    def max_degree(self) -> int:
        """Largest degree with its own slice."""
        return int(self.probs.shape[1]) - 1

    @property
    def width(self) -> int:
        """Number of feature categories (the GIN's input width)."""
        return int(self.probs.shape[2])

    @classmethod
    def fit(cls, graphs: Sequence[Data], rows: Sequence[int], *, num_rows: int, max_degree: int, width: int,
            noise_std: float = 0.0, generator: torch.Generator | None = None) -> NodeFeatureTable:
        r"""Count degree/category pairs of ``graphs``; graph ``i`` goes to row ``rows[i]``.

        With ``noise_std > 0`` (graph-level DP, :mod:`.dp_plan`) each graph's counts are scaled
        to unit L2 norm, so one graph moves the table by at most 1, and every count gets
        :math:`\mathcal{N}(0, \sigma^2)` before negatives are cut and rows renormalised.

        Raises:
            ConfigError: A graph's features are not one-hot of ``width`` categories.
            InvalidInputError: ``noise_std > 0`` without a generator.
        """
        if noise_std > 0 and generator is None:
            raise InvalidInputError("a noisy node-feature table needs a torch.Generator")
        counts = torch.zeros(num_rows, max_degree + 1, width, dtype=torch.float64)
        for graph, row in zip(graphs, rows, strict=True):
            cats = feature_categories(graph)
            if graph.x.size(1) != width:
                raise ConfigError(f"node features have width {graph.x.size(1)}, the task says {width}")
            deg = node_degrees(graph).clamp(max=max_degree)
            own = torch.zeros(max_degree + 1, width, dtype=torch.float64)
            own.index_put_((deg, cats), torch.ones(deg.numel(), dtype=torch.float64), accumulate=True)
            counts[row] += own / own.norm().clamp(min=1e-12) if noise_std > 0 else own
        if noise_std > 0:
            assert generator is not None
            counts = (counts + torch.randn(counts.shape, generator=generator, dtype=torch.float64) * noise_std).clamp(min=0)
        totals = counts.sum(dim=(1, 2), keepdim=True)
        return cls(torch.where(totals > 0, counts / totals.clamp(min=1), counts))

    def conditional(self, row: int) -> torch.Tensor:
        r""":math:`P(f \mid d, y)` as a :math:`(D + 1, F)` table; unseen degrees get :math:`P(f \mid y)`."""
        if not 0 <= row < self.probs.shape[0]:
            raise InvalidInputError(f"row {row} outside the table's {self.probs.shape[0]} rows")
        joint = self.probs[row]
        marginal = joint.sum(dim=0)
        if float(marginal.sum()) <= 0:
            marginal = torch.ones(self.width, dtype=torch.float64)
        per_degree = joint.sum(dim=1, keepdim=True)
        return torch.where(per_degree > 0, joint / per_degree.clamp(min=1e-300), marginal / marginal.sum())

    def featurize(self, graphs: Sequence[Data], rows: Sequence[int], *, generator: torch.Generator) -> list[Data]:
        """Copies of ``graphs`` with one-hot ``x`` drawn node by node from :meth:`conditional`.

        Draws by inverse CDF from one uniform per node, so a table perturbed by CKKS noise
        (~1e-7) picks the same categories as the exact one except with probability ~1e-7 per node.
        """
        tables = {r: self.conditional(r).cumsum(dim=1) for r in set(rows)}
        out = []
        for graph, row in zip(graphs, rows, strict=True):
            deg = node_degrees(graph).clamp(max=self.max_degree)
            cdf = tables[row][deg]
            u = torch.rand(deg.numel(), 1, generator=generator, dtype=torch.float64) * cdf[:, -1:]
            cats = (cdf <= u).sum(dim=1).clamp(max=self.width - 1)
            x = torch.nn.functional.one_hot(cats, self.width).float()
            out.append(Data(x=x, edge_index=graph.edge_index, y=graph.y, num_nodes=int(graph.num_nodes)))
        return out


__all__ = ["NodeFeatureTable", "feature_categories", "node_degrees"]
