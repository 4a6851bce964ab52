"""The comparison: pairing two sides, the metrics (compiled kernel and numpy), running pairs in parallel, the result table, thresholds, plugins."""
