"""The fast engine: the same answers as Strawberry and graphql-core, with less work per field.

Four parts (README.md in this folder says what each plans, what it leaves to graphql-core and
how its equality is proved): `executor` (a graphql-core executor that skips per-field
machinery), `compiler` and `compiled_http` (registered documents answered over HTTP without
the view), `live_frames` and `raw_frames` (one execution per distinct subscription update,
written straight to the socket). Every use of another library's internals is in app.api.upstream.
"""
