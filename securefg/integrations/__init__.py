"""Bridges to federated-learning engines (Flower)."""
