"""The kinds the access service owns, one module each (a plug-in of :class:`assent.runtime.ProposalKind`)."""
