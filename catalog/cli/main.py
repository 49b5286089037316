"""`juncture` entry point: global options, command registry, and the exit-status contract.

Exit status: 0 success; 2 bad arguments, unknown ids, bad settings or a command not available yet
(one line on stderr); 1 internal errors. Each command lives in `catalog/cli/commands/<name>.py`
and imports its heavy dependencies (Spark, Airflow) inside its handler, so `juncture lookup` and
`juncture search` stay fast.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from catalog.cli.commands import COMMAND_MODULES
from catalog.cli.context import CliContext
from catalog.core.errors import UserError
from catalog.core.logs import configure_logging
from catalog.core.settings import load_settings

log = logging.getLogger(__name__)


# argparse's message when an option's value starts with '-' (a column named `-88.8.1`), which it
# takes for another option
_VALUE_MISSING = re.compile(r"argument (--?[\w-]+)(?:/\S+)?: expected one argument$")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        missing = _VALUE_MISSING.match(message)
        if missing:
            message += f" (a value that starts with '-' is written {missing.group(1)}=VALUE)"
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="juncture", description="Find the tables you can join or union with yours.")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)")
    verbosity.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser, required=True)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbosity = -1 if args.quiet else args.verbose
    try:
        settings = load_settings()
        configure_logging(verbosity, fmt=settings.log_format)
        return int(args.handler(args, CliContext(settings)) or 0)
    except UserError as e:
        print(f"juncture: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("juncture: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the one place internal errors are turned into exit status 1
        log.debug("internal error", exc_info=True)
        print(f"juncture: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def entry_point() -> NoReturn:
    sys.exit(main())
