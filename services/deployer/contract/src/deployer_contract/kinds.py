"""The deployer's kind: a row of the kind registry (:data:`assent.kinds.KINDS`)."""

from assent.kinds import KindSpec, Options, Origin

from .source import OWNER, SourceApproval

SOURCE = KindSpec(
    "source",
    OWNER,
    ("propose_source_change",),
    "Source",
    {"propose": "Approve and deploy"},
    decline_label="Discard",
    decisions={"approve": "approved", "discard": "discarded"},
    endpoint="proposals",
    read_tools=("list_repo_files", "read_repo_file", "read_docs"),
    decline="discard",
    supersedes="chat",
    decided_alone=True,  # approving commits and deploys: on its own, with its branch, never by Apply all
    addressed_by="agent",  # decided on the agent's Proposals page, by agent and proposal
    options=Options(SourceApproval, ("approve",)),  # approving takes a branch and a commit message
    reviewers_decline=True,  # discarding needs permission to review feedback, not to decide
    origins=(Origin("agent"), Origin("builder", chat_linked=False)),
)

KINDS = (SOURCE,)
