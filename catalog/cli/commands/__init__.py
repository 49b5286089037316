"""The commands of the command-line contract (docs/contracts.md), one module each, in help order."""

from catalog.cli.commands import (
    autojoin,
    crawl,
    demo,
    index,
    lookup,
    portal,
    rebuild,
    search,
    serve,
    update,
)

COMMAND_MODULES = (demo, portal, crawl, index, update, rebuild, lookup, search, autojoin, serve)
