"""Proof records and numerical checks for every proven object the accountant relies on."""
