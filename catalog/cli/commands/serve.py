"""`juncture serve`: the HTTP lookup API."""

from __future__ import annotations

import argparse

from catalog.cli.commands._stub import not_available


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the HTTP lookup API")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--host", default="127.0.0.1")
    p.set_defaults(handler=not_available("serve"))
