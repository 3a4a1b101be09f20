"""Posts: the write side (create/edit/delete/visibility) and visibility rules."""
