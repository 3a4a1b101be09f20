"""Where the parts meet: the schema built (roots, limits, trusted documents, the executor), the
Subscription root with the websocket's contexts, the graphql-transport-ws handler, the view
(Strawberry's, as ours) and the websocket lane in front of Starlette. The top of app/api: it
imports the schema's parts, the fast engine, the transports and the upstream adapters, and
only app.web imports it (docs/decisions/0051)."""
