"""Wires the edits service: its kinds on the shared runtime, and the workspace API it owns."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from assent.runtime import OwnerKit, ServiceRuntime

from . import api
from .adapters import tables
from .adapters.collections import CollectionsRepository
from .adapters.drafts import DraftsRepository
from .adapters.notes import NotesRepository
from .adapters.repository import EditsRepository
from .kinds.collection import CollectionKind
from .kinds.draft import DraftKind
from .kinds.guild import GuildKind
from .kinds.memory import MemoryKind
from .kinds.note import NoteKind
from .settings import EditsSettings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"  # inside the package: installed with it


def create_app(settings: EditsSettings) -> FastAPI:
    runtime = ServiceRuntime(
        settings,
        tables=tables.shared,
        migrations=MIGRATIONS,
        schema=tables.SCHEMA,
        stores=[EditsRepository, NotesRepository, CollectionsRepository, DraftsRepository],
    )
    kinds = [
        MemoryKind(settings.memory_max_bytes),
        NoteKind(settings.note_max_bytes),
        GuildKind(),
        CollectionKind(),
        DraftKind(settings.task_max_bytes),
    ]
    runtime.serve_kinds(OwnerKit(settings.service_name, kinds, max_result_bytes=settings.max_message_bytes))
    app = runtime.app(title="Assent edits service (internal)")
    api.install(app, runtime, settings)
    return app
