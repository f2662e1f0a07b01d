"""Example pipeline files shipped with dpledger.

``importlib.resources.files("dpledger.examples") / "pipelines"`` holds the TOML pipelines that
``dpledger account`` and ``dpledger report`` read (the plugin template beside them is a separate
distribution and is not installed with dpledger).
"""
