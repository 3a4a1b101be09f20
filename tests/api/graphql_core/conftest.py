"""third_party/ is graphql-core's tests, run by test_upstream_execution.py, not collected as is."""

collect_ignore = ["third_party"]
