"""`juncture serve [--port P]`: the HTTP lookup API (FastAPI on uvicorn)."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the HTTP lookup API")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--host", default="127.0.0.1")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    import uvicorn

    from catalog.api.app import create_app
    from catalog.errors import UserError

    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, got {args.port}")
    app = create_app(ctx.settings)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0
