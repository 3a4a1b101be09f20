"""Where the parts meet: the schema built (roots, limits, trusted documents, the executor), the
Subscription root with the websocket's contexts, and the graphql-transport-ws handler. The
top of app/api: it imports the schema's parts, the fast engine and the transports, and only
app.web imports it (docs/decisions/0051)."""
