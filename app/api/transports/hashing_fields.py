"""How many password-hashing fields one document may run (issue 33).

`signUp`, `logIn` and `changePassword` each cost one or two Argon2 hashes (tens of ms of a
core and ~64 MiB each, PASSWORD_HASH_CONCURRENCY at once per process). A document of 21
aliased `logIn` fields ran them one after another inside one admission slot for 10-50 s.
This validation rule refuses, before anything runs, a mutation whose root selection (its
fragments and inline fragments included) holds more than HASHING_FIELDS_PER_DOCUMENT (1) of them:
BAD_USER_INPUT with `extensions.limit`. Linear in the document: each fragment counted once.
"""

from __future__ import annotations

from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
)

from app.api.transports.document_limits import FragmentMemo
from app.errors import BadInput

# The Mutation fields that hash a password (app.api.schema.mutations).
HASHING_FIELDS = frozenset({"signUp", "logIn", "changePassword"})


def create_hashing_rule(limit: int) -> type[ValidationRule]:
    """A rule class refusing mutations with more than `limit` hashing fields: build it once
    (the validation cache keys on rule classes)."""

    class HashingFieldsRule(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            self.fragment_count = FragmentMemo(
                context, lambda fragment: self.count(fragment.selection_set), 0
            )

        def count(self, selection_set: SelectionSetNode) -> int:
            found = 0
            for selection in selection_set.selections:
                if isinstance(selection, FieldNode):
                    found += selection.name.value in HASHING_FIELDS
                elif isinstance(selection, InlineFragmentNode):
                    found += self.count(selection.selection_set)
                else:
                    assert isinstance(selection, FragmentSpreadNode)
                    found += self.fragment_count(selection.name.value)
            return found

        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            if node.operation is not OperationType.MUTATION:
                return
            found = self.count(node.selection_set)
            if found > limit:
                self.report_error(
                    GraphQLError(
                        f"This document asks for {found} password checks (signUp, logIn, "
                        f"changePassword), over the limit of {limit} per request: send them "
                        "one request at a time.",
                        node,
                        extensions={"code": BadInput.code, "limit": limit},
                    )
                )

    return HashingFieldsRule


__all__ = ["HASHING_FIELDS", "create_hashing_rule"]
