"""Posts: the write side (create/edit/delete/visibility), the visibility rule, the id layout
and posts as timeline entries."""
