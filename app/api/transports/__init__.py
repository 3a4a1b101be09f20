"""HTTP and websocket pieces that know no schema: media types, admission (bodies, slots),
connection guards, socket caps, document limits, trusted documents, the GraphiQL page and
the socket-memory swap. Below the engine and the endpoint, which import them, never the other
way (docs/decisions/0051); above only the upstream adapters (app.api.upstream)."""
