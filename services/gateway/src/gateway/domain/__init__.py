"""The gateway's rules: the turn barrier and the pending-items view. Plain code, no I/O."""
