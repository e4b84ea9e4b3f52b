"""FedSheafHN's structural feedback leak, measured under plaintext and the protected stack.

Usage::

    python bench/fedsheafhn_probe.py --dataset Cora --clients 10 --rounds 3 [--stacks plaintext fedsheafhn_secure]

Runs FedSheafHN once per stack and prints :func:`securefg.attacks.sheaf_feedback.probe_feedback`
on the last round's feedback: update inversion error, feature-inference AUC about the
pseudonym's owner, the same attributed to a *named* client, and pseudonym linkage accuracy.
"""

from __future__ import annotations

import argparse
import json

from securefg.attacks.sheaf_feedback import probe_feedback
from securefg.experiment import RunConfig, run_experiment


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="Cora")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--stacks", nargs="+", default=["plaintext", "fedsheafhn_secure"])
    args = p.parse_args()
    for stack in args.stacks:
        cfg = RunConfig(method="fedsheafhn", dataset=args.dataset, partition="metis", clients=args.clients,
                        rounds=args.rounds, protocol=stack, seed=args.seed, data_seed=1234, progress=False)
        result = run_experiment(cfg)
        probe = probe_feedback(result["_federation"], seed=args.seed)
        print(json.dumps({"stack": stack, "test_acc": result["metrics"].get("test_acc"), **probe}), flush=True)


if __name__ == "__main__":
    main()
