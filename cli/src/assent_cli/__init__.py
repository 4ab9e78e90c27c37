"""assent: the operator's desk on the command line (:mod:`assent_cli.main`)."""
