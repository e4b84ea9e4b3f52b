"""A CeFGC graph generator: score network, noise levels, p(n) and sampling settings in one."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace

import torch
from torch_geometric.data import Data

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.graph_score import serialization
from securefg.models.graph_score.config import EDPScoreConfig
from securefg.models.graph_score.dense import GraphLike, dense_to_graphs, to_dense_batch_adjacency
from securefg.models.graph_score.node_counts import node_count_histogram, sample_node_counts
from securefg.models.graph_score.sampler import LangevinParams, annealed_langevin
from securefg.models.graph_score.score_network import EDPScoreNetwork
from securefg.models.graph_score.training import FitResult, ProgressCallback, train_score_network

#: EDP-GNN's noise levels (``train_com_small.yaml``); CeFGC* uses "6 noise scales".
DEFAULT_SIGMAS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.6)


def make_generator(generator: torch.Generator | int | None) -> torch.Generator:
    """A CPU generator from a generator, a seed, or (``None``) fresh OS entropy."""
    if isinstance(generator, torch.Generator):
        if generator.device.type != "cpu":
            raise InvalidInputError("pass a CPU torch.Generator; draws are made on the CPU")
        return generator
    seed = secrets.randbits(63) if generator is None else int(generator)
    return torch.Generator().manual_seed(seed)


class GraphDiffusionModel:
    r"""The graph generator a CeFGC client trains and ships (EDP-GNN, score-based).

    Holds an :class:`EDPScoreNetwork`, the noise levels :math:`\sigma_1 < \dots < \sigma_L`,
    the node-count histogram :math:`p(n)` of its training graphs and the sender-chosen
    :class:`LangevinParams`, i.e. everything a receiver needs to sample
    :math:`p(G) = p(n)\,p(\mathbf{A} \mid n)` without the sender's data.

    * **CeFGC** (one model per class): ``num_classes=None``; set ``class_label`` so samples
      carry ``y`` even after the server has shuffled the models.
    * **CeFGC\*** (one model, label channel): ``num_classes=K``; the network is conditioned on
      the index ``class * L + level`` and keeps one size histogram per class.

    Args:
        config (EDPScoreConfig, optional): Network sizes; ``num_conditions`` is derived as
            ``L * (num_classes or 1)`` and the given value is ignored.
        sigmas (Sequence[float]): Noise levels. (default: :obj:`DEFAULT_SIGMAS`)
        num_classes (int, optional): Classes of a conditional model. (default: :obj:`None`)
        class_label (int, optional): The class an unconditional model generates.
        max_node_num (int): Largest graph trained on or generated. (default: :obj:`64`)
        sampling (LangevinParams, optional): Sampling settings shipped with the model.
        init_seed (int, optional): Seed of the initial weights; clients that may be averaged
            (CeFGC+) must share it. ``None`` draws a fresh seed.
    """

    def __init__(
        self,
        *,
        config: EDPScoreConfig | None = None,
        sigmas: Sequence[float] = DEFAULT_SIGMAS,
        num_classes: int | None = None,
        class_label: int | None = None,
        max_node_num: int = 64,
        sampling: LangevinParams | None = None,
        init_seed: int | None = None,
    ) -> None:
        self.sigmas = tuple(float(s) for s in sigmas)
        if not self.sigmas or any(not s > 0 for s in self.sigmas):
            raise ConfigError(f"GraphDiffusionModel needs positive sigmas, got {self.sigmas}")
        if num_classes is not None and num_classes < 1:
            raise ConfigError(f"num_classes must be >= 1 or None, got {num_classes}")
        if num_classes is not None and class_label is not None:
            raise ConfigError("class_label is for per-class models; a conditional one takes labels")
        if class_label is not None and class_label < 0:
            raise ConfigError(f"class_label must be >= 0, got {class_label}")
        if not 1 <= max_node_num <= serialization.MAX_NODE_NUM:
            raise ConfigError(f"max_node_num must be in [1, {serialization.MAX_NODE_NUM}]")
        self.num_classes = num_classes
        self.class_label = class_label
        self.max_node_num = max_node_num
        self.sampling = sampling if sampling is not None else LangevinParams()
        rows = num_classes or 1
        cfg = replace(config or EDPScoreConfig(), num_conditions=len(self.sigmas) * rows)
        self.score_net = EDPScoreNetwork(cfg)
        self.reset_parameters(init_seed)
        self.node_count_hist = torch.zeros((rows, max_node_num + 1), dtype=torch.long)

    @property
    def config(self) -> EDPScoreConfig:
        """The network's architecture."""
        return self.score_net.config

    @property
    def num_parameters(self) -> int:
        """Number of trainable weights (the length of :meth:`flat_parameters`)."""
        return sum(p.numel() for p in self.score_net.parameters())

    def reset_parameters(self, init_seed: int | None = None) -> None:
        """Re-initialise the weights; the same ``init_seed`` gives the same weights anywhere."""
        self.score_net.reset_parameters(make_generator(init_seed))

    def fit(
        self,
        graphs: Sequence[GraphLike],
        labels: Sequence[int] | torch.Tensor | None = None,
        *,
        epochs: int,
        batch_size: int = 32,
        lr: float = 1e-3,
        generator: torch.Generator | int | None = None,
        device: torch.device | str = "cpu",
        progress: ProgressCallback | None = None,
        patience: int | None = None,
        min_delta: float = 0.0,
    ) -> FitResult:
        """Train on ``graphs`` with Adam and set the node-count histogram from them.

        Graphs above ``max_node_num`` are left out (counted in the result); the classifier
        can still use them. Training stops early after ``patience`` epochs without improvement.

        Args:
            graphs (Sequence[Data | tuple[Tensor, int]]): Training graphs (structure only).
            labels (Sequence[int] | Tensor, optional): Class of each graph; required exactly
                when the model is conditional.
            epochs (int): Maximum number of epochs.
            batch_size (int): Graphs per step. (default: :obj:`32`)
            lr (float): Adam learning rate. (default: :obj:`1e-3`)
            generator (torch.Generator | int, optional): Randomness of shuffling and noise.
            device (torch.device | str): Where to train. (default: :obj:`"cpu"`)
            progress (ProgressCallback, optional): ``progress(epoch, loss)`` per epoch.
            patience (int, optional): Early-stopping patience in epochs.
            min_delta (float): Improvement that resets the patience counter.

        Returns:
            FitResult: Per-epoch losses, graph counts and timing.
        """
        classes = self._check_labels(labels, len(graphs))
        batch = to_dense_batch_adjacency(graphs, max_node_num=self.max_node_num)
        sizes = batch.flags.sum(dim=1).long()
        kept_classes = None if classes is None else classes[batch.kept]
        hist = torch.zeros_like(self.node_count_hist)
        for row in range(hist.shape[0]):
            rows = sizes if kept_classes is None else sizes[kept_classes == row]
            hist[row] = node_count_histogram(rows.tolist(), max_node_num=self.max_node_num)
        gen = make_generator(generator)
        device = torch.device(device)
        self.score_net.to(device)
        result = train_score_network(
            self.score_net,
            batch.adj.to(device),
            batch.flags.to(device),
            None if kept_classes is None else kept_classes.to(device),
            sigmas=torch.tensor(self.sigmas, device=device),
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            generator=gen,
            patience=patience,
            min_delta=min_delta,
            progress=progress,
        )
        self.node_count_hist = hist
        result.num_graphs, result.num_excluded = len(batch.kept), batch.num_excluded
        return result

    def sample(
        self,
        num_graphs: int,
        *,
        labels: int | Sequence[int] | None = None,
        generator: torch.Generator | int | None = None,
        device: torch.device | str = "cpu",
        batch_size: int = 64,
        params: LangevinParams | None = None,
    ) -> list[Data]:
        """Generate simple undirected graphs by annealed Langevin dynamics.

        Sizes are drawn from the shipped histogram (per class for a conditional model);
        graphs are batched by size to limit padding, and returned in draw order.

        Args:
            num_graphs (int): How many graphs.
            labels (int | Sequence[int], optional): Class of every graph, or one class for all;
                required exactly when the model is conditional.
            generator (torch.Generator | int, optional): Randomness of sizes and dynamics.
            device (torch.device | str): Where to run the network. (default: :obj:`"cpu"`)
            batch_size (int): Graphs per Langevin batch. (default: :obj:`64`)
            params (LangevinParams, optional): Override of the shipped sampling settings.

        Returns:
            list[Data]: Graphs with ``edge_index``, ``num_nodes`` and, when known, ``y``.
        """
        if num_graphs < 0 or batch_size < 1:
            raise InvalidInputError(
                f"need num_graphs >= 0 and batch_size >= 1, got {num_graphs}, {batch_size}"
            )
        if isinstance(labels, int):
            labels = [labels] * num_graphs
        classes = self._check_labels(labels, num_graphs)
        gen, device = make_generator(generator), torch.device(device)
        sizes = torch.zeros(num_graphs, dtype=torch.long)
        for row in range(self.node_count_hist.shape[0]):
            idx = torch.arange(num_graphs) if classes is None else (classes == row).nonzero().flatten()
            if idx.numel():
                sizes[idx] = sample_node_counts(self.node_count_hist[row], idx.numel(), generator=gen)
        out_labels: list[int | None] = (
            [self.class_label] * num_graphs if classes is None else classes.tolist()
        )
        self.score_net.to(device).eval()
        sigmas = torch.tensor(self.sigmas, device=device)
        result: list[Data | None] = [None] * num_graphs
        for chunk in torch.argsort(sizes, stable=True).split(batch_size):
            n = int(sizes[chunk].max())
            flags = (torch.arange(n).unsqueeze(0) < sizes[chunk].unsqueeze(1)).float().to(device)
            adj = annealed_langevin(
                self.score_net,
                flags,
                sigmas=sigmas,
                classes=None if classes is None else classes[chunk].to(device),
                params=params or self.sampling,
                generator=gen,
            )
            chunk_labels = [out_labels[i] for i in chunk.tolist()]
            graphs = dense_to_graphs(adj, sizes[chunk].tolist(), chunk_labels)
            for i, graph in zip(chunk.tolist(), graphs, strict=True):
                result[i] = graph
        return [g for g in result if g is not None]

    def to_tensors(self) -> dict[str, torch.Tensor]:
        """Flat named CPU tensors (header, histogram, sampling settings, weights); no pickle."""
        return serialization.encode(self._header(), self.score_net.state_dict())

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, torch.Tensor]) -> GraphDiffusionModel:
        """Rebuild a model from :meth:`to_tensors` output, validating every field first.

        Raises:
            InvalidInputError: A field is missing, unexpected, mistyped or misshapen.
            ConfigError: The header describes an impossible or over-sized model.
        """
        header = serialization.decode_header(tensors)
        with torch.device("meta"):  # shapes only: a hostile header cannot make us allocate
            expected = EDPScoreNetwork(header.config).state_dict()
        state = serialization.extract_state_dict(tensors, expected)
        model = cls(
            config=header.config,
            sigmas=header.sigmas,
            num_classes=header.num_classes,
            class_label=header.class_label,
            max_node_num=header.max_node_num,
            sampling=header.sampling,
            init_seed=0,
        )
        model.score_net.load_state_dict(state, strict=True)
        model.node_count_hist = header.histogram
        return model

    def flat_parameters(self) -> torch.Tensor:
        """All weights as one float32 CPU vector, in ``state_dict`` order (for HE averaging)."""
        return torch.cat([p.detach().cpu().float().flatten() for p in self.score_net.state_dict().values()])

    def load_flat_parameters(self, vector: torch.Tensor) -> None:
        """Inverse of :meth:`flat_parameters` for a model of identical architecture.

        Raises:
            InvalidInputError: Wrong shape or dtype, or NaN/Inf values.
        """
        expected = self.num_parameters
        if not isinstance(vector, torch.Tensor) or vector.dim() != 1 or vector.numel() != expected:
            shape = tuple(vector.shape) if isinstance(vector, torch.Tensor) else type(vector).__name__
            raise InvalidInputError(f"expected a 1-D tensor of {expected} parameters, got {shape}")
        if not vector.is_floating_point() or not bool(torch.isfinite(vector).all()):
            raise InvalidInputError("parameter vector must be floating point and finite")
        offset = 0
        with torch.no_grad():
            for p in self.score_net.state_dict().values():
                p.copy_(vector[offset : offset + p.numel()].view_as(p))
                offset += p.numel()

    def _header(self) -> serialization.ModelHeader:
        return serialization.ModelHeader(
            config=self.config,
            sigmas=self.sigmas,
            num_classes=self.num_classes,
            class_label=self.class_label,
            max_node_num=self.max_node_num,
            histogram=self.node_count_hist,
            sampling=self.sampling,
        )

    def _check_labels(self, labels: Sequence[int] | torch.Tensor | None, count: int) -> torch.Tensor | None:
        if self.num_classes is None:
            if labels is not None:
                raise InvalidInputError(
                    "this model is unconditional (num_classes=None, CeFGC): pass labels=None, "
                    "or build it with num_classes=K for CeFGC*"
                )
            return None
        if labels is None:
            raise InvalidInputError(
                f"this model is conditional (num_classes={self.num_classes}): pass labels"
            )
        classes = torch.as_tensor(labels, dtype=torch.long).flatten().cpu()
        if classes.numel() != count:
            raise InvalidInputError(f"got {classes.numel()} labels for {count} graphs")
        if classes.numel() and (int(classes.min()) < 0 or int(classes.max()) >= self.num_classes):
            raise InvalidInputError(f"labels must lie in [0, {self.num_classes})")
        return classes

    def __repr__(self) -> str:
        kind = f"num_classes={self.num_classes}" if self.num_classes else f"class_label={self.class_label}"
        return (
            f"{self.__class__.__name__}({kind}, levels={len(self.sigmas)}, "
            f"max_node_num={self.max_node_num}, params={self.num_parameters})"
        )
