"""Builtin method and mechanism plugins."""
