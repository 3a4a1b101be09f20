"""Names vulture cannot see used: `make lint`'s dead-code check (docs/decisions/0075).

`make lint` runs vulture over app, jobs, devtools, tests, benchmarks and migrations (a name a
test or a benchmark uses is used) and fails on a finding in app/, jobs/ or devtools/. A finding
is either dead code, to delete, or a name a framework calls by convention: then it goes here,
under its framework, with the file it is in. Not Python to run: vulture only reads it.
"""

# ruff: noqa
# fmt: off

# Strawberry: resolvers and fields are read from the class (schema names in camelCase).
_.feed_updates  # app/api/endpoint/subscriptions.py, Subscription.feedUpdates
_.set_post_visibility  # app/api/schema/mutations.py
_.like_post
_.unlike_post
_.log_out
_.report_impressions
_.report_engagement
_.show_fewer_like_this  # app/api/schema/mutations.py, negative feedback (decision 0076)
_.mute_author
_.unmute_author
_.has_next_page  # app/api/schema/types.py, PageInfo
_.has_previous_page
_.start_cursor
_.viewer_follows
_.viewer_mutes
_.viewer_has_liked
_.new_post_count
_.latest_post_at
_.on_execute  # SchemaExtension hooks: app/api/schema/cost.py, app/api/transports/trusted.py
_.on_parse

# Strawberry's ASGI view and websocket handler (app/web.py, app/api/endpoint/websocket.py):
# methods and class attributes it calls or reads on the subclass.
_.websocket_adapter_class
_.graphql_transport_ws_handler_class
_.get_context
_.execute_single
_.sub_response  # an argument of the overridden execute_single
_.create_websocket_response
_.encode_json
_.decode_json
_.render_graphql_ide
_.iter_json
_.max_subscriptions_per_connection
_.handle_connection_init
_.run_operation

# graphql-core's Visitor calls enter_<kind>/leave_<kind> by the node's kind.
_.enter_operation_definition  # app/api/schema/cost.py, app/api/transports/document_limits.py, hashing_fields.py
_.enter_string_value
_.leave_document
_.enter_fragment_spread  # app/operation_documents.py

# uvicorn: the protocol class named on the command line (`--http ...:GuardedHttpTools`, the
# launcher) and the attributes its httptools protocol reads (app/api/fast/adapter.py).
_.GuardedHttpTools
_.waiting_for_100_continue
_.chunked_encoding
_.expected_content_length

# redis-py calls pack_command on its connection class (app/redis_client.py).
_.pack_command

# pydantic: validators registered by decorator, settings read by field name from the
# environment (app/config.py).
_._only_packed
_._exact_profile
_._lower_log_level
_._check_invariants
_.redis_timelines_url
_.redis_sessions_url
_.redis_limits_url

# SQLAlchemy: mapped columns written and read by SQL, not by attribute (app/db/models.py).
_.last_active_at
_.published_at
_.updated_at  # FeedFeedback: set by SQL (on conflict), read by the ranking side

# arq: worker classes named on the command line (`arq jobs.worker.WorkerSettings`).
_.WorkerSettings
_.BigLaneWorkerSettings
_.expires_extra_ms  # jobs/connections.py: an ArqRedis built from Sentinel, read by ARQ's enqueue_job
_.default_queue_name  # jobs/connections.py, worker_pool: read by ARQ's Worker

# pydantic: validators run by the model (app/config.py, Settings).
_._legacy_and_retired
_._name_the_variable

# import-linter: a contract type named in .importlinter, its options and rendering hook
# (devtools/upstream_contract.py).
_.UpstreamInternalsContract
_.verbose
_.render_broken_contract

# Settings read by name per candidate source (app/feed/sources.py, `source_limits`:
# getattr(settings, f"feed_source_{name}_max") ...).
_.feed_source_timeline_max
_.feed_source_timeline_timeout_ms
_.feed_source_timeline_concurrency
_.feed_source_pull_max
_.feed_source_pull_timeout_ms
_.feed_source_pull_concurrency
_.feed_source_own_max
_.feed_source_own_timeout_ms
_.feed_source_own_concurrency
_.feed_source_lag_max
_.feed_source_lag_timeout_ms
_.feed_source_lag_concurrency
_.feed_source_recommended_timeout_ms
_.feed_source_recommended_concurrency

# Strawberry: fields set by keyword and read by the executor (PostEdge, Recommendation).
_.liked_by_count
_.recommendation

# SQLAlchemy: tables declared on Base.metadata for the migration comparison (decision 0087);
# the code reads them in SQL by name.
REGION_IDENTITY
POST_TOMBSTONES
REGION_HEARTBEATS
