"""Robust aggregation that composes with secure sums: robust rules over public subgroups' sums."""

from securefg.protocol.robust.mechanism import SubgroupRelease, SubgroupRobust
from securefg.protocol.robust.options import ROBUST_OPTIONS, apply_robust_option, robust_stack
from securefg.protocol.robust.subgroups import check_sizes, partition

__all__ = ["ROBUST_OPTIONS", "SubgroupRelease", "SubgroupRobust", "apply_robust_option", "check_sizes",
           "partition", "robust_stack"]
