"""A template dpledger plugin."""

__version__ = "0.1.0"
