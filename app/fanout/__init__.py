"""The write path after commit: splitting a post into follower batches, hybrid push/pull."""
