"""The ablation reports: summary.md in sections, the controls beside the verdicts, the plots."""
