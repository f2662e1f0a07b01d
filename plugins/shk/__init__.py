"""SHK flows (temporary)."""
