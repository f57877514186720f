"""The ablation statistics: paired differences, intervals, the sequential design, the verdicts."""
