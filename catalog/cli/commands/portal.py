"""`juncture portal serve`: the local Socrata/CKAN-compatible portal used by the demo and tests."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from catalog.cli.context import CliContext
from catalog.core.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("portal", help="run the local Socrata/CKAN-compatible portal")
    psub = p.add_subparsers(dest="portal_command", metavar="ACTION", required=True)
    serve = psub.add_parser("serve", help="serve the portal on loopback")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument(
        "--data",
        metavar="DIR",
        help="folder of datasets (default: <home>/portal, seeded with real tables on first use)",
    )
    serve.add_argument(
        "--seed",
        choices=("demo", "small", "all"),
        default="demo",
        help="which real tables an empty data folder is seeded with",
    )
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:

    from plugins.local_portal import serve_in_background  # deferred: only the command that needs it loads it

    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be in 0..65535, got {args.port}")
    data = Path(args.data) if args.data else Path(ctx.settings.home) / "portal"
    try:
        handle = serve_in_background(data, args.port, seed=args.seed)
    except OSError as e:
        raise UserError(f"cannot serve on 127.0.0.1:{args.port}: {e.strerror or e}") from None
    n = len(handle.store.datasets)
    print(f"portal serving {n} datasets from {data} at {handle.url}", flush=True)
    print(f"  socrata: {handle.url}/api/catalog/v1?domains=127.0.0.1&only=dataset", flush=True)
    print(f"  ckan:    {handle.url}/api/3/action/package_search", flush=True)
    try:
        threading.Event().wait()
    finally:
        handle.stop()
    return 0
