"""GraphiQL served by the project itself, with no CDN: a browser with no internet access
(or a firewall) still gets a working IDE at GET /graphql.

The assets are npm packages vendored under `graphiql_assets/vendor/` (versions, checksums and the
refresh command in its README.md) plus the page's own script, `hybridfeed-graphiql.js`:
queries over HTTP POST and subscriptions over graphql-transport-ws, the Headers pane going
to both (request headers; the websocket's `connection_init` payload).
"""

from __future__ import annotations

import hashlib
import html
from functools import cache
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

GRAPHIQL_ASSETS_PATH = "/graphiql"
GRAPHIQL_ASSETS_DIR = Path(__file__).parent / "graphiql_assets"

# In load order: GraphiQL's UMD build expects the React globals; the page script comes last.
# The npm files sit in vendor/ (copied unchanged; tools that look for repeated code skip it).
SCRIPTS = (
    "vendor/react.production.min.js",
    "vendor/react-dom.production.min.js",
    "vendor/graphql-ws.min.js",
    "vendor/graphiql.min.js",
    "hybridfeed-graphiql.js",
)
STYLESHEETS = ("vendor/graphiql.min.css",)
LICENSES = "vendor/LICENSES.txt"

_PAGE = """<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>hybridfeed GraphiQL</title>
    <link rel="icon" href="data:," />
{stylesheets}
    <style>
      html, body {{ height: 100%; margin: 0; overflow: hidden; }}
      #graphiql {{ height: 100vh; }}
      .graphiql-loading {{ font: 14px system-ui, sans-serif; padding: 16px; color: #555; }}
    </style>
  </head>
  <body>
    <div id="graphiql" data-endpoint="{endpoint}">
      <div class="graphiql-loading">Loading GraphiQL…</div>
    </div>
{scripts}
  </body>
</html>
"""


@cache
def assets_version() -> str:
    """A digest of the page's files: a refreshed asset gets a new URL, so no browser keeps
    running a stale copy next to new ones."""
    digest = hashlib.sha256()
    for name in (*SCRIPTS, *STYLESHEETS):
        digest.update((GRAPHIQL_ASSETS_DIR / name).read_bytes())
    return digest.hexdigest()[:12]


def asset_url(name: str) -> str:
    """The local URL of one asset."""
    return f"{GRAPHIQL_ASSETS_PATH}/{name}?v={assets_version()}"


def graphiql_html(endpoint: str = "/graphql") -> str:
    """The GraphiQL page for `endpoint` (a same-origin path); every asset is local."""
    stylesheets = "\n".join(
        f'    <link rel="stylesheet" href="{html.escape(asset_url(name))}" />'
        for name in STYLESHEETS
    )
    scripts = "\n".join(
        f'    <script src="{html.escape(asset_url(name))}"></script>' for name in SCRIPTS
    )
    return _PAGE.format(
        stylesheets=stylesheets, scripts=scripts, endpoint=html.escape(endpoint, quote=True)
    )


class _Assets(StaticFiles):
    """The page's files and the licenses; not the folder's README or refresh script."""

    served = frozenset((*SCRIPTS, *STYLESHEETS, LICENSES))

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path not in self.served:
            raise HTTPException(status_code=404)
        return await super().get_response(path, scope)


def graphiql_assets_mount() -> Mount:
    """The route serving the vendored files under GRAPHIQL_ASSETS_PATH."""
    return Mount(
        GRAPHIQL_ASSETS_PATH,
        app=_Assets(directory=GRAPHIQL_ASSETS_DIR),
        name="graphiql-assets",
    )
