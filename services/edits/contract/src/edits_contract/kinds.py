"""The edits service's kinds: rows of the kind registry (:data:`assent.kinds.KINDS`). It owns the workspace
directory too (:data:`assent.kinds.WORKSPACE_OWNER`)."""

from assent.kinds import WORKSPACE_OWNER, Answer, KindSpec

from .draft_widget import DraftWidget

OWNER = WORKSPACE_OWNER

MEMORY = KindSpec(
    "memory",
    OWNER,
    ("studio_edit_memory",),
    "Agents",
    {"edit": "Apply edit"},
    read_tools=("studio_read_memory",),
    revertible=True,
)
NOTE = KindSpec(
    "note",
    OWNER,
    ("studio_edit_note",),
    "State",
    {"create": "Create note", "edit": "Apply edit", "delete": "Delete note"},
    read_tools=("studio_list_notes", "studio_read_note"),
    revertible=True,
)
GUILD = KindSpec(
    "guild",
    OWNER,
    ("studio_edit_guild",),
    "Guild",
    {"edit": "Apply edit"},
    read_tools=("studio_read_guild",),
    revertible=True,
)
COLLECTION = KindSpec(
    "collection",
    OWNER,
    ("studio_edit_collection",),
    "State",
    {"create": "Create table", "edit": "Apply edit", "delete": "Delete table"},
    read_tools=("studio_list_collections", "studio_read_collection"),
    revertible=True,
)
DRAFT = KindSpec(
    "draft",
    OWNER,
    ("studio_create_task_draft",),
    "Agents",
    {"publish": "Publish"},
    decline_label="Discard",
    decisions={"publish": "published", "discard": "discarded"},
    endpoint="drafts",
    read_tools=("studio_read_task", "studio_list_task_drafts"),
    decline="discard",
    supersedes="turn",
    widget="studio_task_draft",
    widget_model=DraftWidget,
    answer=Answer(route="read_draft"),
)

KINDS = (MEMORY, NOTE, GUILD, COLLECTION, DRAFT)
