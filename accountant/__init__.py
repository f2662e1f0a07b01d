"""Accountant backends and the selection of the smallest certified bound."""
