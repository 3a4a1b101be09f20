"""Image posts (issue 36): uploads to object storage, media references on posts, URLs that
respect the post's visibility. Timelines and feed sessions keep holding post ids only."""
