"""Method B: DP sliced-Wasserstein gradient flows (DPSWflow-r, DPSWflow, DPSWgen)."""
