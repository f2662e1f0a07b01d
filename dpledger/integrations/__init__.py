"""Bridges to the libraries people already use for DP: dp-accounting's ``DpEvent`` trees and
Opacus's ``PrivacyEngine`` training loops."""
