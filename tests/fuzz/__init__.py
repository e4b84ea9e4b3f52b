"""Fuzz suite: every parser of received bytes or user documents either parses or raises a typed error."""
