"""An agent's access and its bindings as the public routes and the read tool show them (the models of
:mod:`access_contract.routes`)."""

from __future__ import annotations

from access_contract.routes import AccessLine, Binding

from .adapters.repository import HeldBinding
from .domain.access import Line


def line_view(line: Line) -> AccessLine:
    """One line of the agent's access: its own setting, each scope's binding (on, off, or None: none), and whether
    the agent can use it."""
    return AccessLine(
        kind=line.kind,
        id=line.subject,
        label=line.label,
        on=line.on,
        usable=line.usable,
        source=line.source,
        bindings={scope: None if bound is None else ("on" if bound else "off") for scope, bound in line.bound},
        changes_data=line.changes_data if line.kind != "connection" else None,
        connection_id=line.connection_id,
        server=line.server,
        through=line.through,
    )


def binding_view(held: HeldBinding) -> Binding:
    """A binding as stored, with who wrote it last and the request behind it, if any."""
    binding = held.binding
    return Binding(
        scope=binding.scope,
        scope_id=held.scope_id,
        kind=binding.kind,
        id=binding.subject,
        setting="on" if binding.on else "off",
        connection_id=binding.connection_id,
        updated_by=held.updated_by,
        studio_session_id=held.studio_session_id,
        studio_seq=held.studio_seq,
    )
