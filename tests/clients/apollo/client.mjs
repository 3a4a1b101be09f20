// tests/clients/apollo/client.mjs
import { ApolloClient, ApolloLink, HttpLink, InMemoryCache } from '@apollo/client';
import { SetContextLink } from '@apollo/client/link/context';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { isSubscriptionOperation, relayStylePagination } from '@apollo/client/utilities';
import { createClient } from 'graphql-ws';

// SHA-256 in lower-case hex, the persisted queries' key (Web Crypto: Node 20+, browsers on
// https or localhost).
async function sha256(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

export function createFeedClient({ httpUrl, wsUrl, getToken, canRefreshToken = () => false }) {
  // HTTP: the token in the Authorization header of every request.
  const auth = new SetContextLink(async (prevContext) => {
    const token = await getToken();
    return token
      ? { headers: { ...prevContext.headers, Authorization: `Bearer ${token}` } }
      : {};
  });
  // Automatic persisted queries: the hash first, the text once the server asks for it.
  const http = ApolloLink.from([
    auth,
    new PersistedQueryLink({ sha256 }),
    new HttpLink({ uri: httpUrl }),
  ]);
  // Websocket (graphql-transport-ws): the token in connection_init, read at every (re)connect.
  const ws = new GraphQLWsLink(
    createClient({
      url: wsUrl,
      connectionParams: async () => ({ Authorization: `Bearer ${await getToken()}` }),
      // 4403 is a refused token: reconnecting with the same one is refused again.
      shouldRetry: (event) => !(event?.code === 4403 && !canRefreshToken()),
    }),
  );
  return new ApolloClient({
    link: ApolloLink.split(({ query }) => isSubscriptionOperation(query), ws, http),
    cache: new InMemoryCache({
      typePolicies: {
        Query: {
          fields: {
            // One list per mode: CHRONOLOGICAL and RANKED are cached apart. A page without
            // `after` replaces the list; a page with `after` is appended to it.
            feed: relayStylePagination(['mode']),
          },
        },
      },
    }),
  });
}
