// The graphql-http server audits (npm `graphql-http`, the GraphQL over HTTP spec's reference
// implementation) against a running API: a conformance check of /graphql over HTTP.
//
//   node audit.mjs <graphql-url>
//
// stdout: one JSON array, one entry per audit: {id, name, status, reason?}, where status is
// "ok", "warn" or "error" (warn: a SHOULD of the spec, error: a MUST). Exit 0 when the audits
// ran (whatever they found), 1 when they could not run.
import { serverAudits } from 'graphql-http';

const url = process.argv[2] || process.env.GRAPHQL_URL;
if (!url) {
  process.stderr.write('usage: node audit.mjs <graphql-url>\n');
  process.exit(1);
}

const results = [];
for (const audit of serverAudits({ url })) {
  const result = await audit.fn();
  const entry = { id: audit.id, name: audit.name, status: result.status };
  if (result.status !== 'ok') {
    entry.reason = result.reason;
    // The response the audit judged, when it had one: what the server actually sent.
    if (result.response) {
      entry.response = {
        status: result.response.status,
        contentType: result.response.headers.get('content-type'),
        body: await result.response.text().catch(() => null),
      };
    }
  }
  results.push(entry);
}
process.stdout.write(JSON.stringify(results) + '\n');
