"""securefg: secure aggregation for federated graph learning.

The stable, documented API for driving the protocols from another FL stack is :mod:`securefg.api`;
everything else in the package is internal and may change between releases (docs/embedding.md).
"""

from securefg._version import __version__

__all__ = ["__version__"]
