"""Fields whose values are the kind registry's: a request's kind, action, section, decision, outcome, widget, and
its card's origin.

Each is validated, refused and documented as ``Literal[...]`` of the registry's values would be, but the values are
read when a message is first validated or documented, not when its model is defined: the registry is made of the
owners' contract packages (:mod:`assent.owners`), which import these models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticKnownError, core_schema

from .. import kinds


@dataclass(frozen=True)
class OneOf:
    """A string that is one of ``values()``, which are read each time (a cached registry's)."""

    values: Callable[[], tuple[str, ...]]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def check(value: Any) -> str:
            allowed = self.values()
            if isinstance(value, str) and value in allowed:
                return value
            # Literal's own refusal, word for word.
            raise PydanticKnownError("literal_error", {"expected": _listed(allowed)})

        return core_schema.no_info_plain_validator_function(check)

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return handler(core_schema.literal_schema(list(self.values())))


def _listed(values: tuple[str, ...]) -> str:
    quoted = [repr(value) for value in values]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


Kind = Annotated[str, OneOf(lambda: kinds.KIND_NAMES)]
Action = Annotated[str, OneOf(lambda: kinds.ACTIONS)]
Widget = Annotated[str, OneOf(lambda: kinds.WIDGETS)]
Section = Annotated[str, OneOf(lambda: kinds.SECTIONS)]
Decision = Annotated[str, OneOf(lambda: kinds.DECISIONS)]
Outcome = Annotated[str, OneOf(lambda: kinds.OUTCOMES)]
Origin = Annotated[str, OneOf(lambda: kinds.ORIGINS)]
