"""graphql-core internals: modules not re-exported by the `graphql` package, and the
executor's private memo. Public graphql-core (`graphql`, `graphql.language`, ...) is used
directly elsewhere."""

from __future__ import annotations

from typing import Any

# The executor's own types and helpers (graphql-core 3.3's executor module layout).
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.execution.execute import execute_subscription_event
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path, Undefined
from graphql.pyutils.gather_with_cancel import gather_with_cancel

__all__ = [
    "FieldDetailsList",
    "GroupedFieldSet",
    "Path",
    "Undefined",
    "execute_subscription_event",
    "forget_subfield_memo",
    "gather_with_cancel",
    "to_nodes",
]


def forget_subfield_memo(executor: Any) -> None:
    """graphql-core 3.3 shares `_relevant_sub_fields` (its collect_subfields memo) between
    a subscription's executor and its per-event copies; a fresh one per copy."""
    executor._relevant_sub_fields = {}
