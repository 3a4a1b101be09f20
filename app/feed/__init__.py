"""The read path: candidates, filtering, ranking, feed sessions, hydration."""
