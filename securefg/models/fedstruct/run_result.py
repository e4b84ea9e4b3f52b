"""Result record shared by the FedStruct reference trainer and its baselines."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunResult:
    """Accuracies of one training run (fractions in ``[0, 1]``).

    Model selection is by validation accuracy (the paper leaves it unspecified, notes B6), so
    ``test_acc`` is the test accuracy at the best validation epoch; ``final_test_acc`` is at the
    last epoch. Test accuracy is pooled over all clients' test nodes (a node-weighted mean of the
    per-client accuracies, which are listed too).

    Args:
        method (str): Short name, e.g. ``"fedstruct-hop2vec"``.
        test_acc (float): Test accuracy at the best validation epoch.
        final_test_acc (float): Test accuracy after the last epoch.
        val_acc (float): Best validation accuracy.
        best_epoch (int): 1-based epoch of ``val_acc``.
        seconds (float): Wall-clock training time, NSF pre-training included.
        per_client_test_acc (tuple[float, ...]): Test accuracy of each client's nodes.
    """

    method: str
    test_acc: float
    final_test_acc: float
    val_acc: float
    best_epoch: int
    seconds: float
    per_client_test_acc: tuple[float, ...] = field(default=())

    def __str__(self) -> str:
        return (f"{self.method}: test {100 * self.test_acc:.2f} (final {100 * self.final_test_acc:.2f}),"
                f" val {100 * self.val_acc:.2f} @ {self.best_epoch}, {self.seconds:.1f}s")
