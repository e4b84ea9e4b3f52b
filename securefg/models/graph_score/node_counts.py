"""The node-count distribution p(n) that ships with a model.

A receiving client has none of the sender's graphs, so it cannot copy EDP-GNN's "size of a
random training graph". The sender ships a histogram of its training sizes instead; it is part
of the generative model p(G) = p(n) p(A | n) and leaks exactly that distribution.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from securefg.errors import InvalidInputError


def node_count_histogram(counts: Sequence[int], *, max_node_num: int) -> torch.Tensor:
    """Histogram of graph sizes: entry ``n`` is the number of graphs with ``n`` nodes.

    Args:
        counts (Sequence[int]): Node count of every graph, each in ``[1, max_node_num]``.
        max_node_num (int): Largest representable size.

    Returns:
        torch.Tensor: int64 tensor of shape ``(max_node_num + 1,)``.
    """
    sizes = torch.as_tensor(list(counts), dtype=torch.long)
    if sizes.numel() and (int(sizes.min()) < 1 or int(sizes.max()) > max_node_num):
        raise InvalidInputError(f"node counts must lie in [1, {max_node_num}]")
    return torch.bincount(sizes, minlength=max_node_num + 1)


def sample_node_counts(
    histogram: torch.Tensor, num: int, *, generator: torch.Generator | None
) -> torch.Tensor:
    """Draw ``num`` graph sizes i.i.d. from ``histogram`` (a 1-D count tensor).

    Raises:
        InvalidInputError: The histogram is empty (no training graphs for this class).
    """
    if int(histogram.sum()) <= 0:
        raise InvalidInputError(
            "the node-count histogram is empty: fit the model (on graphs of this class) first"
        )
    probs = histogram.double().cpu()
    return torch.multinomial(probs, num, replacement=True, generator=generator)
