"""FedStruct as a federated method: the server half and client halves over the exchange API."""

from securefg.methods.fedstruct.method import FedStruct

__all__ = ["FedStruct"]
