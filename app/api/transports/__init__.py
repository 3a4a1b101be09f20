"""HTTP and websocket pieces that know no schema: media types, admission (bodies, slots),
connection guards, socket caps, document limits, trusted documents and the GraphiQL page.
The bottom of app/api: the engine and the endpoint import them, never the other way
(docs/decisions/0051)."""
