"""Feed ranking: the hand-set formula and its rules (scoring), the stage-2 features and served
models (features, model, registry, experiments), the two stages (stages), and the operator's
`python -m app.ranking explain` (explain; decision 0078)."""
