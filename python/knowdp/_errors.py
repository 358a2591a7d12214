"""The exceptions and warnings of the knowdp package."""

from __future__ import annotations

from typing import Optional, Sequence


class KnowdpError(Exception):
    """Base class of every error the knowdp package raises."""


class BinaryNotFoundError(KnowdpError, FileNotFoundError):
    """The ``knowdp`` command could not be found or run.

    The message says how to build it (``go build -o knowdp ./cmd/knowdp`` from
    the repository root) and how to point the package at it.
    """


class CLIError(KnowdpError):
    """The ``knowdp`` command failed.

    Attributes:
        message: the command's own error message (its standard error, without
            warnings and without the "Run 'knowdp help ...'" hint).
        exit_code: the command's exit status: 2 for a usage error (a missing
            or invalid flag: see :class:`UsageError`), 1 for any other failure
            (a file that cannot be read, a value outside its declared domain).
        stderr: everything the command wrote to standard error.
        command: the command line that was run.
    """

    def __init__(self, message: str, exit_code: int, stderr: str, command: Sequence[str]) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.stderr = stderr
        self.command = list(command)

    def __str__(self) -> str:
        return f"{self.message} (exit status {self.exit_code})"


class UsageError(CLIError):
    """The ``knowdp`` command refused its arguments (exit status 2).

    A usage error is decided from the arguments alone, before any data is
    read: a missing or invalid flag, or an output path that would overwrite
    an input or an existing file.
    """


class ServerError(KnowdpError):
    """The knowdp server refused or failed a request.

    The server answers every error as ``{"error": {"code": ..., "message": ...}}``;
    its text never depends on private data.

    Attributes:
        status: the HTTP status (400, 401, 403, 404, 409, 429, 500, 503, ...).
        code: the server's error code (``bad_request``, ``unauthorized``,
            ``insufficient_budget``, ``not_found``, ``rate_limited``,
            ``unavailable``, ...; docs/server.md lists them).
        message: the server's message.
        retry_after: the ``Retry-After`` header in seconds, when the server
            gave one (503: nothing was charged; retry with the same
            ``idempotency_key``).
        idempotency_key: the ``Idempotency-Key`` the request was sent with, if
            any: a retry with it returns the stored answer instead of charging
            again.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        retry_after: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.idempotency_key = idempotency_key

    def __str__(self) -> str:
        return f"{self.code}: {self.message} (HTTP {self.status})"


class InsufficientBudgetError(ServerError):
    """The query costs more than the analyst's remaining budget (HTTP 403).

    Nothing was charged. The decision depends on the request and the budget
    alone, never on the data.
    """


class ServerUnreachableError(KnowdpError, ConnectionError):
    """The server could not be reached (connection refused, DNS, timeout)."""


class NotPrivateWarning(UserWarning):
    """A release is NOT differentially private (seeded noise, or domains read
    from the data): never publish it."""
