"""The ablation config: its keys declared and checked, the arms they make, the validated ``Ablation``."""
