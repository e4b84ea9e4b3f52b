"""Importing this module registers every built-in attack (and the trimmed-mean defence)."""

from securefg.attacks import (  # noqa: F401
    community_inference,
    crafted_nsf,
    defences,
    diffusion_membership,
    feature_support,
    generator_membership,
    generator_reconstruction,
    label_inference,
    label_poisoning_attacks,
    link_stealing,
    malformed_payloads,
    nsf_link,
    partner_recovery,
    poisoning,
    sheaf_feedback,
    spoofed_generator,
    structure_link,
)
