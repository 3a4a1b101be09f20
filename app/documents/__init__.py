"""Clients' persisted-document manifests, registered by operators: `python -m app.documents`
(an entry point: it builds the schema to validate them; the table's code is
app.client_documents, which the API reads)."""
