"""The synthetic probe (`python -m app.probe`): a ring of canary accounts that post, delete,
narrow visibility, block, unfollow and read their feeds and live sockets on a schedule,
through the public API only, counting every leak (a hidden post served after its change was
acknowledged), every lost post (never visible within the freshness budget) and every
duplicate (a post a scroll served twice). `feed_probe_leaks_total` must stay 0.

It imports nothing of the service but its settings helpers (app.config): any deployment can
be probed with `--url`, from anywhere (the contract: .importlinter). Parts: `client` (HTTP and
websocket), `ring` (the canaries), `round` (what a round does), `ledger` (the leak rule),
`metrics`, `settings`. docs/decisions/0024-synthetic-probe.md says why it is built so."""
