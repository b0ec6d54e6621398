"""narrative-eval."""
