"""The connections service's rules, with no I/O."""
