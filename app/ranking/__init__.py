"""Feed ranking: the hand-set formula and its rules (scoring), the stage-2 features and served
models (features, model, registry, experiments), the two stages (stages), and the operator's
`python -m app.ranking export|report` (decision 0078; `explain` runs the read path, so it is
app.feed.explain behind `python -m app.explain`)."""
