"""Errors a user of the ``dml`` command can fix, and the exit statuses they give."""
from __future__ import annotations

__all__ = ["CLIError", "JobError", "EXIT_USAGE", "EXIT_FAILURE"]

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CLIError(Exception):
    """An error the user can fix; printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILURE):
        super().__init__(message)
        self.code = code


class JobError(CLIError):
    """A job file that fails validation; the message names the field(s). Exit status 2."""

    def __init__(self, messages):
        messages = [messages] if isinstance(messages, str) else list(messages)
        super().__init__("\n".join(messages), EXIT_USAGE)
        self.messages = messages
