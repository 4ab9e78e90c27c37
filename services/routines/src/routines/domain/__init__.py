"""The routines service's rules, with no I/O."""
