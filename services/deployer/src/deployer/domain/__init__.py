"""The deployer's rules, with no I/O: which paths a proposal may change, what a file may hold, and how
proposals of one chat replace each other."""
