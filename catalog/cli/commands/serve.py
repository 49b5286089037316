"""`juncture serve [--host H] [--port P] [--workers N]`: the HTTP lookup API (FastAPI on uvicorn)."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the HTTP lookup API")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes sharing the port (about one per core for the most throughput)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    from catalog.api.server import serve  # deferred: FastAPI and uvicorn load only for this command

    serve(ctx.settings, args.host, args.port, workers=args.workers)
    return 0
