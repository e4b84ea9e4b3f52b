"""FedStruct-B's label poisoning shifts the labels the malicious client trains on.

Since the party programs, a FedStruct client builds its training batch only once the relayed
NSF rows are assembled (``on_nsf_assemble``), after ``setup_client``: the variant must shift the
batch there, or the attack errors (it did, in every malicious-client audit of FedStruct-B).
"""

from __future__ import annotations

from typing import Any

import torch

from securefg.attacks.label_poisoning import label_poisoned_method
from tests.attacks.conftest import run_method

OPTIONS = {"variant": "B", "nsf": "hop2vec", "structure_hops": 2, "structure_dim": 8}


def _batches(result: dict[str, Any]) -> dict[str, torch.Tensor]:
    fed = result["_federation"]
    return {pid: fed.parties[pid].state["batch"].y.clone() for pid in fed.client_ids}


def test_the_malicious_fedstruct_client_trains_on_shifted_labels_and_the_others_do_not(node_task: Any) -> None:
    classes = int(node_task.num_classes)
    name = label_poisoned_method("fedstruct", "test_shift", ["client/0"], shift=1, num_classes=classes,
                                 shape=lambda u: u, tag="fedstruct/update")
    honest = _batches(run_method(node_task, "fedstruct", "plaintext", rounds=1, options=OPTIONS, keep=False))
    poisoned = _batches(run_method(node_task, name, "plaintext", rounds=1, options=OPTIONS, keep=False))
    assert torch.equal(poisoned["client/0"], (honest["client/0"] + 1) % classes)
    for pid in honest:
        if pid != "client/0":
            assert torch.equal(poisoned[pid], honest[pid])
