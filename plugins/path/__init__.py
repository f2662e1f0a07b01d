"""Method C (PATH): user-level DP synthetic longitudinal tables with a privately fine-tuned causal LM, and flattened marginal baselines."""
