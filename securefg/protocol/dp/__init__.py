"""Differential privacy: Gaussian noise transforms, the accountant, shuffling bounds, DP-SGD.

Importing this package registers the transforms ``dp_gaussian``, ``clip_norm`` and
``robust_aggregation`` with the protocol stack. Transforms record every Gaussian release in a
:class:`PrivacyAccountant` kept in the releasing party's private state; after a run,
``privacy_report(fed.parties, stack=stack)`` merges them and returns JSON-ready data whose
``"epsilon"`` is the largest client-level epsilon (RDP, ``delta=1e-5`` unless given) and whose
``"clients"`` holds each client's epsilons against the released output and against the
aggregator. It returns ``{}`` when no DP release happened.
"""

from securefg.protocol.dp.accountant import Mode, PrivacyAccountant, Release, Unit, accountant_of
from securefg.protocol.dp.clip_norm import ClipNorm
from securefg.protocol.dp.dpsgd import PrivateTraining, make_private
from securefg.protocol.dp.gaussian import DPGaussian
from securefg.protocol.dp.noise import clip_to_norm, gaussian_noise
from securefg.protocol.dp.report import privacy_report
from securefg.protocol.dp.robust import RobustAggregation
from securefg.protocol.dp.shuffle import shuffle_amplification

__all__ = [
    "ClipNorm",
    "DPGaussian",
    "Mode",
    "PrivacyAccountant",
    "PrivateTraining",
    "Release",
    "RobustAggregation",
    "Unit",
    "accountant_of",
    "clip_to_norm",
    "gaussian_noise",
    "make_private",
    "privacy_report",
    "shuffle_amplification",
]
