"""Write graphql/schema.graphql from the code (`make schema`); a test diffs the two."""

from __future__ import annotations

import sys

from app.api.endpoint.schema import build_schema
from app.config import PROJECT_ROOT, Settings, get_settings

SDL_PATH = PROJECT_ROOT / "graphql" / "schema.graphql"


def current_sdl(settings: Settings) -> str:
    return build_schema(settings).as_str().rstrip() + "\n"


def main() -> int:
    SDL_PATH.write_text(current_sdl(get_settings()))
    print(f"wrote {SDL_PATH.relative_to(PROJECT_ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
