"""The edits service's rules: plain models and functions, no I/O."""
