"""knowdp: differentially private tables that account for public knowledge.

Two entry points, standard library only (pandas DataFrames where pandas is
installed, plain rows otherwise):

- :func:`release` runs the ``knowdp release`` command on a CSV file, a
  DataFrame or a list of dicts and returns the released tables and their
  privacy story (``release.json``).
- :class:`Client` talks to the query server (``knowdp serve``): datasets,
  budgets, queries, free answers derived from your own measurements, history.

Errors are exceptions carrying the command's or the server's own message:
:class:`CLIError` and :class:`UsageError` (exit status 2), :class:`ServerError`
and :class:`InsufficientBudgetError`.
"""

from ._client import Answer, Client
from ._errors import (
    BinaryNotFoundError,
    CLIError,
    InsufficientBudgetError,
    KnowdpError,
    NotPrivateWarning,
    ServerError,
    ServerUnreachableError,
    UsageError,
)
from ._release import Release, find_binary, release, run_cli

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "BinaryNotFoundError",
    "CLIError",
    "Client",
    "InsufficientBudgetError",
    "KnowdpError",
    "NotPrivateWarning",
    "Release",
    "ServerError",
    "ServerUnreachableError",
    "UsageError",
    "find_binary",
    "release",
    "run_cli",
]
