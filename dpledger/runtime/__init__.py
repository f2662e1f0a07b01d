"""Orchestration: composition graphs and pipeline files, the runtime ledger and the runner, the
plugin host and its integrity guard, the run record, and the pytest plugin for plugin authors.

It sits on the kernel (``dpledger.core``) and the accountant (``dpledger.accountant``); plugins
and products sit on it.
"""
