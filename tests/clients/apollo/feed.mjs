// tests/clients/apollo/feed.mjs
import { CombinedGraphQLErrors, gql } from '@apollo/client';

export const HOME_FEED = gql`
  query HomeFeed($mode: FeedMode!, $first: Int!, $after: String) {
    feed(mode: $mode, first: $first, after: $after) {
      edges { cursor node { id body createdAt author { id handle } } }
      pageInfo { hasNextPage endCursor }
      sessionId
      degraded
    }
  }
`;

export const FEED_UPDATES = gql`
  subscription FeedUpdates {
    feedUpdates { newPostCount latestPostAt }
  }
`;

// The first page. Always pass `mode`: it is the cache key (an omitted mode is a list of its own).
export function watchFeed(client, mode, first = 20) {
  return client.watchQuery({ query: HOME_FEED, variables: { mode, first, after: null } });
}

// The next page, appended to the cached list (its cursor read from the cache, which fetchMore
// has updated before it resolves). A RANKED cursor whose feed session expired answers
// CURSOR_EXPIRED: load the first page again (it replaces the list).
export async function loadMore(client, feed) {
  const { endCursor } = client.readQuery({ query: feed.query, variables: feed.variables }).feed.pageInfo;
  try {
    return await feed.fetchMore({ variables: { after: endCursor } });
  } catch (error) {
    const expired = CombinedGraphQLErrors.is(error)
      && error.errors.some((e) => e.extensions?.code === 'CURSOR_EXPIRED');
    if (!expired) throw error;
    return feed.refetch({ after: null });
  }
}
