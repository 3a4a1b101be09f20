"""The GraphQL schema's parts: object types, the Query and Mutation roots, resolver bodies,
DataLoaders, the request context and query cost. What the fast engine plans against, so it
imports neither the engine nor the endpoint (docs/decisions/0051)."""
