"""`juncture portal serve`: the local Socrata/CKAN-compatible portal used by the demo and tests."""

from __future__ import annotations

import argparse

from catalog.cli.commands._stub import not_available


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("portal", help="run the local Socrata/CKAN-compatible portal")
    psub = p.add_subparsers(dest="portal_command", metavar="ACTION", required=True)
    serve = psub.add_parser("serve", help="serve the portal on loopback")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--data", metavar="DIR", help="folder of datasets (default: the bundled real tables)")
    serve.set_defaults(handler=not_available("portal serve"))
