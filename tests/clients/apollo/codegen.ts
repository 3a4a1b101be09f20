// tests/clients/apollo/codegen.ts
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  // The server's SDL (graphql/schema.graphql) and the client's documents: here the demo's.
  schema: '../../../graphql/schema.graphql',
  documents: ['../../../graphql/operations/*.graphql'],
  generates: {
    './gql/': {
      preset: 'client',
      // Plain types for fragments' fields (Apollo Client has its own data masking).
      presetConfig: { fragmentMasking: false },
      config: {
        // DateTime is an RFC 3339 string (@specifiedBy in the SDL); no scalar left `unknown`.
        scalars: { DateTime: 'string' },
        strictScalars: true,
        enumsAsTypes: true,
        useTypeImports: true,
      },
    },
  },
};

export default config;
