// Compiled with the generated gql/ under `tsc --strict` (tests/clients/test_codegen.py): the
// documents' types as the codegen config above gives them.
import type { ApolloClient } from '@apollo/client';

import { FeedDocument, type FeedMode, type FeedQuery } from './gql/graphql';

type Post = NonNullable<FeedQuery['feed']['edges'][number]['node']>;

export function newestFirst(posts: readonly Post[]): Post[] {
  // createdAt is a string (the DateTime scalar), so Date.parse takes it as it is.
  return [...posts].sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt));
}

export async function firstPage(client: ApolloClient, mode: FeedMode): Promise<Post[]> {
  const { data } = await client.query({ query: FeedDocument, variables: { mode, first: 20 } });
  return newestFirst(data?.feed.edges.map((edge) => edge.node) ?? []);
}
