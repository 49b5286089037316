"""Exception types a user can act on. Each carries the context needed to fix the problem.

The CLI turns `UserError` subclasses into a one-line message and exit status 2; anything else is an
internal error (exit status 1).
"""

from __future__ import annotations


class JunctureError(Exception):
    """Base of every error Juncture raises on purpose."""


class UserError(JunctureError):
    """The request cannot be served as asked (bad argument, unknown id, bad configuration)."""


class SettingsError(UserError):
    """A setting is unknown or malformed; the message names the file (or variable) and the key."""

    def __init__(self, where: str, key: str, problem: str) -> None:
        super().__init__(f"{where}: {key}: {problem}")
        self.where, self.key, self.problem = where, key, problem


class UnknownIdError(UserError):
    """A table_id or column_id that the catalog does not hold."""

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"unknown {kind} {ident!r}")
        self.kind, self.ident = kind, ident


class NotAvailableError(UserError):
    """A command of the contract that this build does not implement yet."""

    def __init__(self, command: str) -> None:
        super().__init__(f"{command} is not available yet")
        self.command = command


class SignatureMismatchError(UserError):
    """MinHash signatures made under different specs (permutations, hash): comparing them would give
    meaningless similarities without any error, so the index refuses."""

    def __init__(self, expected: object, got: object, *, what: str = "query") -> None:
        super().__init__(
            f"{what} signed with {got} but the index was built with {expected}: "
            f"re-sign the {what} (or rebuild the index) with one spec"
        )
        self.expected, self.got, self.what = expected, got, what


class XashMismatchError(UserError):
    """XASH super keys made under different specs (hash size, character slots): a query hash could set a
    bit the index never set, so the filter would drop joinable rows without any error; the index refuses."""

    def __init__(self, expected: object, got: object, *, what: str = "query") -> None:
        super().__init__(
            f"{what} hashed with {got} but the index was built with {expected}: "
            f"re-hash the {what} (or rebuild the index) with one spec"
        )
        self.expected, self.got, self.what = expected, got, what


class JavaError(UserError):
    """Spark needs a Java runtime (17 or newer) and none usable was found."""


class LakeError(JunctureError):
    """A lake (Delta) table could not be read or written as asked."""

    def __init__(self, table: str, problem: str) -> None:
        super().__init__(f"lake table {table!r}: {problem}")
        self.table, self.problem = table, problem


class EmbedderMismatchError(UserError):
    """Vectors made by different embedders (name, version or dimension): their distances mean
    nothing, so a query embedded otherwise than the index would get wrong answers without any error;
    the index refuses."""

    def __init__(self, expected: object, got: object) -> None:
        super().__init__(
            f"query embedded with {got} but the index was built with {expected}: "
            f"embed the query (or rebuild the index) with one embedder"
        )
        self.expected, self.got = expected, got
