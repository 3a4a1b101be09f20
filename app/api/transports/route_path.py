"""The path a request names inside this app, as Starlette's router matches it.

Why: under `uvicorn --root-path /api` (an app mounted below a prefix) `scope["path"]` carries
the prefix (`/api/graphql`) while the router strips `scope["root_path"]` before it routes.
A guard that compared the raw path with `/graphql` let every request under a root path past
its bounds (admission slots, body size and time, 414), though the router still served it.
Every guard that picks requests by path compares this instead.
"""

from __future__ import annotations

from starlette.types import Scope


def route_path(scope: Scope) -> str:
    """`scope["path"]` without the app's root_path, exactly as Starlette's `get_route_path`
    (a private helper there): a path outside the root path is left whole."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root or not path.startswith(root):
        return path
    if path == root:
        return ""
    return path[len(root) :] if path[len(root)] == "/" else path
