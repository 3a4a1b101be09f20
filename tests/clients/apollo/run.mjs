// Runs docs/API.md's Apollo Client 4 recipe (client.mjs, feed.mjs, unchanged) against a server;
// tests/clients/test_apollo_recipe.py drives it and checks what it reports.
//
//   CLIENT_HTTP_URL=... CLIENT_WS_URL=... CLIENT_TOKEN=... node run.mjs
//
// stdout, one JSON object a line: {"step": "feed", ...} per mode, {"step": "expired", ...},
// {"step": "subscribed", ...} (then the driver posts as a followed author),
// {"step": "update", ...}, {"step": "apq", ...}, {"step": "done"}. A failure: a JSON line
// {"step": "error", ...} and exit 1.
import { gql } from '@apollo/client';
import WebSocket from 'ws';

import { createFeedClient } from './client.mjs';
import { FEED_UPDATES, HOME_FEED, loadMore, watchFeed } from './feed.mjs';

const httpUrl = process.env.CLIENT_HTTP_URL;
const wsUrl = process.env.CLIENT_WS_URL;
const token = process.env.CLIENT_TOKEN;
const PAGE = 2;
const TIMEOUT_MS = 30000;

globalThis.WebSocket ??= WebSocket; // browsers have it; Node 20 does not

// Every HTTP request the client sends, counted (the APQ flow's round trips).
let requests = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = (...args) => {
  requests += 1;
  return realFetch(...args);
};

// A document no other step sends, so its first call is the server's first sight of its hash.
const APQ_PROBE = gql`
  query ApqProbe {
    viewer { id handle followingCount }
  }
`;

const emit = (line) => process.stdout.write(JSON.stringify(line) + '\n');

function settled(observable) {
  // The query's first complete result (the ObservableQuery stays watched, as useQuery keeps it).
  return new Promise((resolve, reject) => {
    observable.subscribe({
      next: (result) => {
        if (result.error) reject(result.error);
        else if (!result.loading && result.data) resolve(result);
      },
      error: reject,
    });
  });
}

const ids = (feed) => feed.edges.map((edge) => edge.node.id);
const cached = (client, mode) =>
  client.readQuery({ query: HOME_FEED, variables: { mode, first: PAGE, after: null } })?.feed;

async function pages(client, mode) {
  const feed = watchFeed(client, mode, PAGE);
  await settled(feed);
  const lengths = [ids(cached(client, mode)).length];
  for (let page = 2; page <= 3; page += 1) {
    await loadMore(client, feed);
    lengths.push(ids(cached(client, mode)).length);
  }
  const list = cached(client, mode);
  return { feed, lengths, ids: ids(list), createdAt: list.edges.map((e) => e.node.createdAt) };
}

async function main() {
  const client = createFeedClient({ httpUrl, wsUrl, getToken: async () => token });

  const chronological = await pages(client, 'CHRONOLOGICAL');
  const ranked = await pages(client, 'RANKED');
  for (const [mode, run] of [['CHRONOLOGICAL', chronological], ['RANKED', ranked]]) {
    emit({
      step: 'feed',
      mode,
      lengths: run.lengths,
      ids: run.ids,
      createdAt: run.createdAt,
      // read back after both modes were loaded: each list is still its own
      cachedAfterBoth: ids(cached(client, mode)),
    });
  }
  // A first page replaces the list it is cached in.
  await chronological.feed.refetch();
  emit({ step: 'refetched', mode: 'CHRONOLOGICAL', ids: ids(cached(client, 'CHRONOLOGICAL')) });

  // CURSOR_EXPIRED: another device's first page opens a new RANKED session, which ends this
  // one (the server keeps FEED_SESSIONS_PER_VIEWER=1 here); loadMore reloads from the top.
  const other = createFeedClient({ httpUrl, wsUrl, getToken: async () => token });
  await other.query({ query: HOME_FEED, variables: { mode: 'RANKED', first: PAGE, after: null } });
  const before = ids(cached(client, 'RANKED')).length;
  await loadMore(client, ranked.feed);
  emit({ step: 'expired', before, after: ids(cached(client, 'RANKED')) });
  other.stop();

  // A live frame over GraphQLWsLink after a post by a followed author.
  const frames = [];
  await new Promise((resolve, reject) => {
    const subscription = client.subscribe({ query: FEED_UPDATES }).subscribe({
      next: (result) => {
        if (result.error) return reject(result.error);
        frames.push(result.data.feedUpdates);
        if (frames.length === 1) emit({ step: 'subscribed', frame: frames[0] });
        if (result.data.feedUpdates.newPostCount > 0) {
          subscription.unsubscribe();
          resolve();
        }
      },
      error: reject,
    });
  });
  emit({ step: 'update', frames });

  // APQ: the same query three times, each from the network; HTTP requests per call.
  const perCall = [];
  for (let call = 0; call < 3; call += 1) {
    const start = requests;
    await client.query({ query: APQ_PROBE, fetchPolicy: 'network-only' });
    perCall.push(requests - start);
  }
  emit({ step: 'apq', perCall });

  client.stop();
  emit({ step: 'done' });
}

const timer = setTimeout(() => {
  emit({ step: 'error', error: 'timeout' });
  process.exit(2);
}, TIMEOUT_MS);

main().then(
  () => {
    clearTimeout(timer);
    process.exit(0);
  },
  (error) => {
    emit({ step: 'error', error: String(error), errors: error?.errors });
    process.exit(1);
  },
);
