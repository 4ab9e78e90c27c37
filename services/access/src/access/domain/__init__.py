"""The access service's rules, with no I/O."""
