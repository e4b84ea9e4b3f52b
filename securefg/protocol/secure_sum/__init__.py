"""Masked secure sums with dropouts (SecAgg+): the ``secure_sum`` mechanism.

Importing this package registers ``secure_sum`` for the ``aggregate`` and ``peer_sum``
exchanges. Layout (fcp SecAgg's one file per stage and side):

* ``constants`` — stage names, domains, share kinds, drop and abort reasons;
* ``prg``, ``shamir``, ``crypto``, ``quantize``, ``harary`` — the building blocks;
* ``messages``, ``route``, ``context``, ``settings`` — wire formats, paths and per-call state;
* ``client/<stage>.py``, ``server/<stage>.py`` — the two stage machines;
* ``mechanism`` — the driver registered with the protocol stack; ``blind`` (with ``group_key``
  and ``blinded_result``) — ``blind_sum``, a ``shared_sum`` only the clients can read.
"""

from securefg.protocol.secure_sum.blind import BlindSum
from securefg.protocol.secure_sum.mechanism import SecureSum, SecureSumReport

__all__ = ["BlindSum", "SecureSum", "SecureSumReport"]
