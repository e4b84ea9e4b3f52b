"""Client side of the secure sum: one module per stage (fcp ``client/secagg_client_*_state``)."""

from securefg.protocol.secure_sum.client.advertise_keys import AdvertiseKeys
from securefg.protocol.secure_sum.client.base import ClientStage, Done
from securefg.protocol.secure_sum.client.consistency_check import ConsistencyCheck
from securefg.protocol.secure_sum.client.masked_input import MaskedInput
from securefg.protocol.secure_sum.client.share_keys import ShareKeys
from securefg.protocol.secure_sum.client.unmask import Unmask

__all__ = ["AdvertiseKeys", "ClientStage", "ConsistencyCheck", "Done", "MaskedInput", "ShareKeys", "Unmask"]
