"""Handler for contract commands that a later issue fills in."""

from __future__ import annotations

import argparse

from catalog.cli.context import CliContext
from catalog.core.errors import NotAvailableError


def not_available(name: str):  # type: ignore[no-untyped-def]
    def handler(args: argparse.Namespace, ctx: CliContext) -> int:
        raise NotAvailableError(name)

    return handler
