"""Errors that the CLI and services turn into one clear line."""


class JobawareError(Exception):
    """A user-facing error: its message names what was wrong and where."""


class InputError(JobawareError):
    """Bad input data: a file, line or field that cannot be read."""


class ContractError(JobawareError):
    """A table broke its data contract; `report` holds the readable failures."""

    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report


class TooLargeError(InputError):
    """Input over a stated size limit (a service answers 413)."""
