// tests/clients/apollo/persisted.ts: the client preset's persisted documents, as a build that
// sends ids only would make them (docs/API.md "Persisted queries"; tests/clients/
// test_codegen_manifest.py registers the output and sends its ids).
import { addTypenameSelectionDocumentTransform, type ClientPresetConfig } from '@graphql-codegen/client-preset';
import type { CodegenConfig } from '@graphql-codegen/cli';

const presetConfig: ClientPresetConfig = {
  fragmentMasking: false,
  // persisted-documents.json: {"sha256:<hex>": "<printed document>"}.
  persistedDocuments: true,
};

const config: CodegenConfig = {
  schema: '../../../graphql/schema.graphql',
  documents: ['../../../graphql/operations/*.graphql'],
  generates: {
    './gql-persisted/': {
      preset: 'client',
      presetConfig,
      // `__typename` in every selection set but the root, as Apollo Client's cache adds it.
      documentTransforms: [addTypenameSelectionDocumentTransform],
      config: { scalars: { DateTime: 'string' }, strictScalars: true },
    },
  },
};

export default config;
