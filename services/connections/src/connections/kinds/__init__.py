"""The kinds the connections service owns, one module each (a plug-in of :class:`assent.runtime.ProposalKind`)."""
