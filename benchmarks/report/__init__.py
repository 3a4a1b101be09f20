"""`python -m benchmarks.report`: the articles' celebrity argument made by this project, on this
machine, in one command (issue 25).

It generates a Zipf-shaped follow graph with planted 50k- and 500k-follower authors and a share
of inactive users (COPY; `generate`), starts the REAL service on scratch servers (a private
redis-server, a scratch PostgreSQL database, the API, the outbox relay and the ARQ workers per
lane, as `make run` starts them; `system`), drives it over HTTP through the scenarios
(`scenarios`), checks that every post reached every active follower exactly once and nothing
leaked (`check`), measures the raw limits of the same servers (`limits`) and writes a Markdown
report with PNG charts (`render`) to docs/benchmarks/.
"""
