"""Method C (PATH): user-level DP synthetic longitudinal tables.

A privately fine-tuned causal language model, and flattened marginal baselines (AIM, Direct).
"""
