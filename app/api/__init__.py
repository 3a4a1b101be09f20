"""The GraphQL layer (Strawberry only): parse arguments, check permission, call a service."""
