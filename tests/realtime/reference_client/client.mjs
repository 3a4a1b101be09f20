// The reference graphql-ws client (npm `graphql-ws`, as used by GraphiQL, Apollo and urql)
// subscribing to feedUpdates: a conformance check of the server's graphql-transport-ws.
//
//   node client.mjs <ws-url> <token> [events=1] [timeout-seconds=20]
//
// Each argument may come from the environment instead: FEED_WS_URL, FEED_TOKEN, FEED_EVENTS,
// FEED_TIMEOUT_SECONDS. FEED_AUTH_KEY names the connection_init key (default `Authorization`,
// capitalised as GraphiQL users type it). FEED_RETRY picks the reconnect policy: `none`
// (default: retryAttempts 0), `default` (graphql-ws's own: 5 attempts, every close but its
// fatal codes retried) or `documented` (docs/API.md, "Live updates": 5 attempts, no retry on
// 4403). Each connection attempt writes `CONNECTING` to stderr.
//
// stdout: one JSON line per received event (the ExecutionResult), then `READY` after the
// first one (the subscription is live). Exit 0 after <events> events. Any error, close or
// timeout first: a JSON line on stderr and a non-zero exit (1 error, 2 timeout, 3 closed).
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const QUERY = 'subscription FeedUpdates { feedUpdates { newPostCount latestPostAt } }';

const [argUrl, argToken, argEvents, argTimeout] = process.argv.slice(2);
const url = argUrl || process.env.FEED_WS_URL;
const token = argToken || process.env.FEED_TOKEN;
const events = Number(argEvents || process.env.FEED_EVENTS || 1);
const timeoutSeconds = Number(argTimeout || process.env.FEED_TIMEOUT_SECONDS || 20);
const authKey = process.env.FEED_AUTH_KEY || 'Authorization';

function write(stream, line) {
  return new Promise((resolve) => stream.write(line + '\n', () => resolve()));
}

let finished = false;

async function finish(code, problem) {
  if (finished) return;
  finished = true;
  clearTimeout(timer);
  if (problem) await write(process.stderr, JSON.stringify(problem));
  try {
    await Promise.race([client?.dispose(), new Promise((r) => setTimeout(r, 1000))]);
  } catch {
    // disposing a socket that is already gone: nothing left to release
  }
  process.exit(code);
}

function describe(error) {
  if (error && typeof error === 'object' && typeof error.code === 'number' && 'reason' in error) {
    // A CloseEvent (ws): the server, or the client on a protocol violation, closed the socket.
    return { error: 'closed', code: error.code, reason: String(error.reason ?? '') };
  }
  if (Array.isArray(error)) return { error: 'graphql', errors: error };
  if (error instanceof Error) return { error: error.name || 'Error', message: error.message };
  if (typeof error?.message === 'string') return { error: 'socket', message: error.message };
  return { error: 'unknown', message: String(error) };
}

function fail(error) {
  const problem = describe(error);
  return finish(problem.error === 'closed' ? 3 : 1, problem);
}

if (!url || !token || !Number.isInteger(events) || events < 1 || !(timeoutSeconds > 0)) {
  await write(
    process.stderr,
    'usage: node client.mjs <ws-url> <token> [events>=1] [timeout-seconds>0] ' +
      '(or FEED_WS_URL, FEED_TOKEN, FEED_EVENTS, FEED_TIMEOUT_SECONDS)',
  );
  process.exit(64);
}

let received = 0;
const timer = setTimeout(() => {
  finish(2, {
    error: 'timeout',
    message: `${received} of ${events} events after ${timeoutSeconds} s`,
  });
}, timeoutSeconds * 1000);

const retry = process.env.FEED_RETRY || 'none';
const policies = {
  none: { retryAttempts: 0 },
  default: {},
  documented: { retryAttempts: 5, shouldRetry: (event) => !(event?.code === 4403) },
};
if (!(retry in policies)) {
  await write(process.stderr, `FEED_RETRY must be one of ${Object.keys(policies).join(', ')}`);
  process.exit(64);
}

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { [authKey]: `Bearer ${token}` },
  lazy: false,
  ...policies[retry],
  onNonLazyError: fail,
  on: { connecting: () => process.stderr.write('CONNECTING\n') },
});

client.on('error', fail);
client.on('closed', (event) => {
  if (!finished) fail(event);
});

client.subscribe(
  { query: QUERY },
  {
    next: async (result) => {
      if (finished) return;
      if (result.errors?.length) {
        fail(result.errors);
        return;
      }
      received += 1;
      // One write per event: the READY line can never overtake or split an event line.
      await write(process.stdout, JSON.stringify(result) + (received === 1 ? '\nREADY' : ''));
      if (received >= events) finish(0);
    },
    error: fail,
    complete: () => {
      if (!finished) {
        finish(1, { error: 'complete', message: `server completed after ${received} events` });
      }
    },
  },
);
