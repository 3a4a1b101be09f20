"""Authentication: signed bearer tokens."""
