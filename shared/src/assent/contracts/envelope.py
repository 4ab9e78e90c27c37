"""The envelope every Assent message carries, and the rules for reading one off the wire.

Every message is a frozen pydantic model. Its envelope fields are:

- ``id``: a UUID that is the deduplication key; a consumer applies a message with a given ``id`` at most once.
- ``type``: the message's name (commands are imperative, events past tense).
- ``v``: the schema version of that type. A breaking change adds a new version and an upcaster from the old.
- ``ts``: when the producer created the message (UTC).
- ``correlation_id``: the id that ties one conversation of messages together (a decision and its outcome).
- ``causation_id``: the ``id`` of the message that caused this one, when there is one.

Readers are tolerant: unknown fields are ignored, so adding an optional field is not a breaking change.
"""

from __future__ import annotations

import builtins
import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar, cast
from uuid import UUID, uuid4

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

_SURROGATE = re.compile("[\ud800-\udfff]")


def _utf8(value: Any) -> Any:
    """Refuse a string that UTF-8 cannot encode: one holding a lone surrogate (JSON's ``"\\ud800"`` decodes to one).

    Such a string would pass every other check and fail later, when a database driver, Kafka or a JSON
    response encodes it.
    """
    if isinstance(value, str) and not value.isascii():
        found = _SURROGATE.search(value)
        if found is not None:
            raise ValueError(
                f"text must be valid Unicode: it holds a lone surrogate (U+{ord(found.group()):04X}) "
                f"at position {found.start()}, which UTF-8 cannot encode"
            )
    return value


Id = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, strip_whitespace=True, pattern=r"^[^\x00-\x1f\x7f]+$"),
    BeforeValidator(_utf8),
]
"""An identifier chosen by a producer (session, agent, tool call, ...): no control characters, valid UTF-8."""

Seq = Annotated[int, Field(ge=0, le=2_147_483_647)]
"""A sequence or step number: what PostgreSQL's ``integer`` holds."""


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    return cast(str, _utf8(value))


Text = Annotated[str, AfterValidator(_no_nul)]
"""Free text that PostgreSQL can store: anything but NUL characters and lone surrogates (not UTF-8)."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class Message(BaseModel):
    """Base of every message on a topic. Subclasses pin ``type`` and ``v`` with ``Literal`` defaults."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: UUID = Field(default_factory=uuid4)
    type: str
    v: int = 1
    ts: datetime = Field(default_factory=utcnow)
    correlation_id: UUID | None = None
    causation_id: UUID | None = None

    registry: ClassVar[dict[str, builtins.type[Message]]] = {}  # builtins: ``type`` is a field here

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        type_field = cls.model_fields.get("type")
        if type_field is not None and isinstance(type_field.default, str):
            Message.registry[type_field.default] = cls

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()


def examples_folder(message: builtins.type[Message]) -> Path:
    """Where the golden examples of ``message`` are: ``examples/`` beside the module that defines it (shared's, or an
    owner's contract package's), one file per version and variant, ``<type>.v<n>[.<k>].json``."""
    module = sys.modules[message.__module__].__file__
    assert module is not None
    return Path(module).parent / "examples"


class MalformedMessage(ValueError):
    """A message that cannot be read: not JSON, an unknown type or version, or invalid fields.

    Consumers send such a message to the topic's dead-letter topic and carry on.
    """


Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""(type, version) -> function turning that version's JSON into the next version's JSON."""


def upcaster(type_: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register a function that rewrites ``type_`` at ``from_version`` into ``from_version + 1``."""

    def register(fn: Upcaster) -> Upcaster:
        UPCASTERS[(type_, from_version)] = fn
        return fn

    return register


def parse_message(raw: bytes | str, accept: tuple[type[Message], ...] | None = None) -> Message:
    """Read one message off the wire, upcasting older versions to the current one.

    Raises :class:`MalformedMessage` when the bytes are not a valid message of an accepted type.
    """
    try:
        return _parse(raw, accept)
    except RecursionError as exc:  # JSON nested deeper than the interpreter's stack (decoding, validating, reporting)
        raise MalformedMessage("a message must not be nested this deeply") from exc


def _parse(raw: bytes | str, accept: tuple[type[Message], ...] | None) -> Message:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MalformedMessage("a message must be a JSON object")
    type_ = data.get("type")
    model = Message.registry.get(type_) if isinstance(type_, str) else None
    if model is None or not isinstance(type_, str):
        raise MalformedMessage(f"unknown message type {type_!r}")
    if accept is not None and model not in accept:
        raise MalformedMessage(f"message type {type_!r} does not belong on this topic")
    current = model.model_fields["v"].default
    version = data.get("v", 1)
    if not isinstance(version, int) or version < 1 or version > current:
        raise MalformedMessage(f"unsupported version {version!r} of {type_!r} (current is {current})")
    while version < current:
        step = UPCASTERS.get((type_, version))
        if step is None:
            raise MalformedMessage(f"no upcaster from {type_!r} v{version}")
        data = step(data)
        version += 1
        data["v"] = version
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise MalformedMessage(f"invalid {type_}: {exc.errors(include_url=False)}") from exc
