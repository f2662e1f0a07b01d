"""The builtin aggregation method: DP count, sum and mean per partition key on an engine."""
