"""The runtime every Assent service is built from: consumers with one failure policy, the unit of work,
the proposal kit that owner services plug their kinds into, the shared tables and their migrations."""

from .consumer import FailurePolicy, Received, batch_span, subscribe
from .kit import (
    Applied,
    Call,
    Inverse,
    LiveCard,
    LiveView,
    Output,
    OwnerKit,
    Proposal,
    ProposalKind,
    Reverted,
    RevertRequest,
    Stale,
    Tool,
)
from .service import ServiceRuntime, serve, service_metadata
from .tables import SharedTables, shared_tables
from .uow import StoredProposal, UnitOfWork

__all__ = [
    "Applied",
    "Call",
    "FailurePolicy",
    "Inverse",
    "LiveCard",
    "LiveView",
    "Output",
    "OwnerKit",
    "Proposal",
    "ProposalKind",
    "Received",
    "RevertRequest",
    "Reverted",
    "ServiceRuntime",
    "SharedTables",
    "Stale",
    "StoredProposal",
    "Tool",
    "UnitOfWork",
    "batch_span",
    "serve",
    "service_metadata",
    "shared_tables",
    "subscribe",
]
