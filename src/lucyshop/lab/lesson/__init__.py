"""What the notebooks use: the printed and drawn lessons, the inline checks, and re-execution."""
