"""Aggregator side of the secure sum: one module per stage (fcp ``server/secagg_server_*_state``)."""

from securefg.protocol.secure_sum.server.advertise_keys import AdvertiseKeys, begin, peel
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.consistency_check import ConsistencyCheck
from securefg.protocol.secure_sum.server.masked_input import MaskedInput
from securefg.protocol.secure_sum.server.share_keys import ShareKeys
from securefg.protocol.secure_sum.server.unmask import Completed, Unmask, request_unmask

__all__ = [
    "AdvertiseKeys", "Completed", "ConsistencyCheck", "MaskedInput", "ServerStage", "ShareKeys",
    "Unmask", "begin", "peel", "request_unmask",
]
