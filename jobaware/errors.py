"""Errors that the CLI and services turn into one clear line."""


class JobawareError(Exception):
    """A user-facing error: its message names what was wrong and where."""


class UsageError(JobawareError):
    """A command called wrongly: an option value out of its range or of the wrong kind (exit 2, as click's own)."""


class InputError(JobawareError):
    """Bad input data: a file, line or field that cannot be read."""


class UnreadableFile(InputError):
    """A whole file no record can be read from (empty, binary, not of its format, unreadable). Among several files it
    is one bad record of its own and the others are read (`jobaware.reading.unreadable`); alone, or in strict mode, it
    is the error."""


class ContractError(JobawareError):
    """A table broke its data contract; `report` holds the readable failures."""

    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report


class TooLargeError(InputError):
    """Input over a stated size limit (a service answers 413)."""


QUIET = {"missing", "extra_forbidden", "value_error", "assertion_error", "too_long", "too_short", "string_too_long",
         "string_too_short", "string_pattern_mismatch"}  # the message says it all, or the input is large


def field_path(loc: tuple) -> str:
    """A pydantic error location as a JSON path: `scripts[3].text`."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")


def shown(value, limit: int = 60) -> str:
    """A short repr of a value, however large it is."""
    if isinstance(value, list | dict) and len(value) > 8:
        return f"a {type(value).__name__} of {len(value):,} items"
    text = repr(value[: limit + 1] if isinstance(value, str) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(exc, limit: int = 1, unknown: str = "unknown field") -> str:
    """A pydantic ValidationError as one line, each error led by its field's JSON path (none for a rule of the whole
    object, whose message names its fields): `top: input should be less than or equal to 20, got 99`."""
    errors = exc.errors(include_url=False)
    parts = []
    for error in errors[:limit]:
        if error["type"] == "extra_forbidden":
            message = unknown
        else:
            message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            message = message[:1].lower() + message[1:] if message[:2] != message[:2].upper() else message
            if error["type"] not in QUIET and "input" in error:
                message += f", got {shown(error['input'])}"
        where = field_path(error["loc"])
        parts.append(f"{where}: {message}" if where else message)
    more = len(errors) - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
