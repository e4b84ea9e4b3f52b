"""Robust aggregation that composes with protected sums: robust rules over public subgroups'
sums (``subgroup_robust``), or over the inner products of CKKS-encrypted updates, judged by the
key holder (``ckks_robust``), or over the encrypted sketches of updates the kept clients then
sum with SecAgg+ (``masked_robust``), or by a blind sum only the clients read (``blind_robust``)."""

from securefg.protocol.robust.blind_robust import BlindRobust
from securefg.protocol.robust.ckks_robust import CKKSRobust, JudgedRelease
from securefg.protocol.robust.masked_robust import MaskedRobust
from securefg.protocol.robust.mechanism import SubgroupRelease, SubgroupRobust
from securefg.protocol.robust.options import ROBUST_OPTIONS, apply_robust_option, robust_stack
from securefg.protocol.robust.plaintext_krum import PlaintextKrum
from securefg.protocol.robust.subgroups import check_sizes, partition

__all__ = [
           "ROBUST_OPTIONS",
           "BlindRobust",
           "CKKSRobust",
           "JudgedRelease",
           "MaskedRobust",
           "PlaintextKrum",
           "SubgroupRelease",
           "SubgroupRobust",
           "apply_robust_option",
           "check_sizes",
           "partition",
           "robust_stack",
]
