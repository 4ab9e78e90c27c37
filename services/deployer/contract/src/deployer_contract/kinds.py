"""The deployer's kind: a row of the kind registry (:data:`assent.kinds.KINDS`)."""

from assent.kinds import KindSpec

from .source import OWNER, ApprovalOptions

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
    options=ApprovalOptions,
)

KINDS = (SOURCE,)
