"""Posts: the write side (create/edit/delete/visibility), the visibility rule, the id layout,
the body cache and posts as timeline entries."""
