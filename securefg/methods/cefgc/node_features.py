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

Drawn node by node, categories lose how they sit next to each other (PROTEINS' training graphs,
seed 0: 0.667 of edges join two nodes of one category, 0.475 if categories were independent;
MUTAG's nitrogen-oxygen bonds are 6.9 times as frequent as independence predicts). With
``--option feature_model=pairwise`` the sender also ships ``P(f_u, f_v | class)`` over the ends
of its edges (one more leak of the same kind), and the receiver refines the per-degree draw by
:data:`GIBBS_SWEEPS` Gibbs sweeps of the pairwise model
``P(f_v | rest) ∝ P(f_v | d_v, y) · Π_u P(f_u, f_v | y) / (P(f_u | y) P(f_v | y))`` over the
neighbours ``u`` of ``v``. Both tables are averages of per-graph counts, so the pair average and
the DP noise treat them alike (one graph's counts of both scaled to unit norm together).

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
#: Gibbs sweeps over a synthetic graph when the table carries edge frequencies.
GIBBS_SWEEPS = 5
#: Weight of the uniform pair distribution mixed into an edge table, so no pair is impossible.
EDGE_SMOOTHING = 0.01


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
        edge_probs (torch.Tensor, optional): :math:`(R, F, F)`, the categories at the two ends
            of an edge, :math:`P(f_u, f_v \mid y)`, each row summing to 1 (or all zero). With it,
            :meth:`featurize` refines its draw by Gibbs sweeps. (default: ``None``)

    Raises:
        InvalidInputError: Wrong rank or shape, too large, negative or non-finite entries.
    """

    def __init__(self, probs: torch.Tensor, edge_probs: torch.Tensor | None = None) -> None:
        self.probs = _checked(probs, "node feature table", "(rows, degrees, categories)")
        self.edge_probs = None if edge_probs is None else _checked(edge_probs, "edge feature table", "(rows, categories, categories)")
        rows, _, width = self.probs.shape
        if self.edge_probs is not None and tuple(self.edge_probs.shape) != (rows, width, width):
            raise InvalidInputError(f"edge feature table has shape {tuple(self.edge_probs.shape)}, "
                                    f"the node table needs {(rows, width, width)}")

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
            edges: bool = False, noise_std: float = 0.0, generator: torch.Generator | None = None) -> NodeFeatureTable:
        r"""Count degree/category pairs of ``graphs`` (and, with ``edges``, category pairs at the
        ends of every edge); graph ``i`` goes to row ``rows[i]``.

        With ``noise_std > 0`` (graph-level DP, :mod:`.dp_plan`) each graph's counts, both
        tables together, are scaled to unit L2 norm, so one graph moves the release by at most 1,
        and every count gets :math:`\mathcal{N}(0, \sigma^2)` before negatives are cut and rows
        renormalised.

        Raises:
            ConfigError: A graph's features are not one-hot of ``width`` categories.
            InvalidInputError: ``noise_std > 0`` without a generator.
        """
        if noise_std > 0 and generator is None:
            raise InvalidInputError("a noisy node-feature table needs a torch.Generator")
        counts = torch.zeros(num_rows, max_degree + 1, width, dtype=torch.float64)
        pairs = torch.zeros(num_rows, width, width, dtype=torch.float64)
        for graph, row in zip(graphs, rows, strict=True):
            cats = feature_categories(graph)
            if graph.x.size(1) != width:
                raise ConfigError(f"node features have width {graph.x.size(1)}, the task says {width}")
            deg = node_degrees(graph).clamp(max=max_degree)
            own = torch.zeros(max_degree + 1, width, dtype=torch.float64)
            own.index_put_((deg, cats), torch.ones(deg.numel(), dtype=torch.float64), accumulate=True)
            own_pairs = torch.zeros(width, width, dtype=torch.float64)
            if edges and graph.edge_index is not None and graph.edge_index.numel():
                ends = cats[graph.edge_index]
                own_pairs.index_put_((ends[0], ends[1]), torch.ones(ends.size(1), dtype=torch.float64), accumulate=True)
            scale = (own.square().sum() + own_pairs.square().sum()).sqrt().clamp(min=1e-12) if noise_std > 0 else 1.0
            counts[row] += own / scale
            pairs[row] += own_pairs / scale
        if noise_std > 0:
            assert generator is not None
            counts = (counts + torch.randn(counts.shape, generator=generator, dtype=torch.float64) * noise_std).clamp(min=0)
            if edges:
                pairs = (pairs + torch.randn(pairs.shape, generator=generator, dtype=torch.float64) * noise_std).clamp(min=0)
        return cls(_normalised(counts), _normalised(pairs) if edges else None)

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

    def log_association(self, row: int) -> torch.Tensor:
        r""":math:`\log P(f_u, f_v \mid y) - \log P(f_u \mid y) - \log P(f_v \mid y)` over edges, an
        :math:`(F, F)` table; smoothed by :data:`EDGE_SMOOTHING`, symmetrised (CKKS noise)."""
        if self.edge_probs is None:
            raise InvalidInputError("this node feature table carries no edge frequencies")
        joint = self.edge_probs[row]
        joint = (joint + joint.T) / 2
        total = float(joint.sum())
        joint = (1 - EDGE_SMOOTHING) * (joint / total if total > 0 else joint) + EDGE_SMOOTHING / self.width**2
        joint = joint / joint.sum()
        ends = joint.sum(dim=1)
        return joint.log() - ends.log()[:, None] - ends.log()[None, :]

    def featurize(self, graphs: Sequence[Data], rows: Sequence[int], *, generator: torch.Generator) -> list[Data]:
        """Copies of ``graphs`` with one-hot ``x`` drawn node by node from :meth:`conditional`,
        then (with edge frequencies) refined by :data:`GIBBS_SWEEPS` Gibbs sweeps.

        Draws by inverse CDF from one uniform per node, so a table perturbed by CKKS noise
        (~1e-7) picks the same categories as the exact one except with probability ~1e-7 per node.
        """
        conditionals = {r: self.conditional(r) for r in set(rows)}
        tables = {r: c.cumsum(dim=1) for r, c in conditionals.items()}
        pairwise = {r: self.log_association(r) for r in set(rows)} if self.edge_probs is not None else {}
        out = []
        for graph, row in zip(graphs, rows, strict=True):
            deg = node_degrees(graph).clamp(max=self.max_degree)
            cdf = tables[row][deg]
            u = torch.rand(deg.numel(), 1, generator=generator, dtype=torch.float64) * cdf[:, -1:]
            cats = (cdf <= u).sum(dim=1).clamp(max=self.width - 1)
            if row in pairwise and graph.edge_index is not None and graph.edge_index.numel():
                cats = _gibbs(cats, conditionals[row][deg], pairwise[row], graph.edge_index, generator)
            x = torch.nn.functional.one_hot(cats, self.width).float()
            out.append(Data(x=x, edge_index=graph.edge_index, y=graph.y, num_nodes=int(graph.num_nodes)))
        return out


def _checked(t: torch.Tensor, what: str, layout: str) -> torch.Tensor:
    """``t`` as float64 on the CPU, if it is a non-empty, not too large, finite, non-negative 3-d tensor."""
    if not isinstance(t, torch.Tensor) or t.dim() != 3 or min(t.shape) < 1:
        shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise InvalidInputError(f"a {what} is a non-empty {layout} tensor, got {shape}")
    if t.numel() > MAX_TABLE_ENTRIES:
        raise InvalidInputError(f"{what} has {t.numel()} entries, more than {MAX_TABLE_ENTRIES}")
    t = t.detach().to(torch.float64).cpu()
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
        raise InvalidInputError(f"{what} entries must be finite and non-negative")
    return t


def _normalised(counts: torch.Tensor) -> torch.Tensor:
    """Every row of ``counts`` scaled to sum 1 (an all-zero row stays zero)."""
    totals = counts.sum(dim=(1, 2), keepdim=True)
    return torch.where(totals > 0, counts / totals.clamp(min=1e-300), counts)


def _gibbs(cats: torch.Tensor, prior: torch.Tensor, log_assoc: torch.Tensor, edge_index: torch.Tensor,
           generator: torch.Generator) -> torch.Tensor:
    """Resample every node's category from its degree prior times its neighbours' pair terms,
    :data:`GIBBS_SWEEPS` times in a random order each sweep."""
    n = cats.numel()
    log_prior = prior.clamp(min=1e-300).log()
    order = torch.argsort(edge_index[0], stable=True)
    targets = edge_index[1, order].tolist()
    starts = torch.cat([torch.zeros(1, dtype=torch.long), degree(edge_index[0], n, dtype=torch.long).cumsum(0)]).tolist()
    cats, last = cats.clone(), log_prior.size(1) - 1
    for _ in range(GIBBS_SWEEPS):
        uniforms = torch.rand(n, generator=generator, dtype=torch.float64)
        for v in torch.randperm(n, generator=generator).tolist():
            logits = log_prior[v] + log_assoc[cats[targets[starts[v]:starts[v + 1]]]].sum(dim=0)
            weights = (logits - logits.max()).exp().cumsum(dim=0)
            cats[v] = min(int((weights <= uniforms[v] * weights[-1]).sum()), last)
    return cats


__all__ = ["GIBBS_SWEEPS", "NodeFeatureTable", "feature_categories", "node_degrees"]
