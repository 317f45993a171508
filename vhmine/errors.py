"""Exceptions that say what failed, where, and what to do next.

The library raises these; the CLI prints their text and exits with status 2. Each message
names the failing thing and the next step inside the text itself, not in a log line.
"""


class VhmineError(Exception):
    """Base class of every error vhmine reports to a user."""


class InputError(VhmineError):
    """A bad argument or input file (threshold out of range, empty collection, ...)."""


class OutputError(VhmineError):
    """A stage could not write its output (a full disk or quota, a read-only or lost mount)."""


class IndexMissingError(VhmineError):
    """No index of that name exists."""


class IndexCorruptError(VhmineError):
    """An index exists but is half-written or its files disagree."""


class EncoderError(VhmineError):
    """An encoder could not be resolved or loaded."""


class EncoderMismatchError(VhmineError):
    """The encoders asked for differ from those an index was built with."""


class DownloadError(VhmineError):
    """A download failed or did not match its checksum."""


class StoreError(VhmineError):
    """The curation store cannot be opened or is not a vhmine store."""


class StoreConnectionError(StoreError):
    """The database server cannot be reached, or the connection broke while a change was being committed."""


class StoreMissingError(StoreError):
    """No store exists where one is only to be read (`vhmine status`): nothing is created."""


class StoreCorruptError(StoreError):
    """The store's SQLite file is not a database, or is damaged."""


class StoreExtraMissingError(StoreError):
    """This install lacks a library the store needs (the app extra: SQLAlchemy, Alembic)."""


class StoreVersionError(StoreError):
    """The store was written by a newer vhmine, whose schema this one does not know."""


class AuthError(VhmineError):
    """A worker token is unknown, or a worker lacks the right for an action."""


class LeaseError(VhmineError):
    """An item is leased to another worker, or was already saved by someone."""


class FormError(InputError):
    """A worker's form input is invalid; `field` names the form field at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class FormatError(InputError):
    """A benchmark file is malformed; the message names the file, row and field."""


class UnbalancedError(VhmineError):
    """A yes/no benchmark would not have 50/50 yes and no answers within each mode."""


class ExportError(VhmineError):
    """A benchmark could not be written (destination exists, image missing, ...)."""


class EvalError(VhmineError):
    """A benchmark could not be scored (missing predictions, unknown parser, ...)."""


# --- model access (vhmine.llm): probe, describe, generate, eval ----------------------------------


class LLMError(VhmineError):
    """A request to a model endpoint failed; `status` says how ("unavailable", "refused", ...)."""

    status = "error"


class LLMUnavailableError(LLMError):
    """The endpoint kept answering 429 / 5xx, timing out or refusing connections after every retry."""

    status = "unavailable"


class LLMRefusalError(LLMError):
    """The model refused, or the endpoint rejected the request under its content policy (not retried)."""

    status = "refused"


class LLMMalformedError(LLMError):
    """The endpoint's answer could not be read (not JSON, no choices, no image) after every retry."""

    status = "malformed"


class LLMAuthError(LLMError):
    """No API key, or the endpoint rejected the key: nothing more is sent."""

    status = "auth"


class CostCapError(LLMError):
    """The next request could take spending past --max-cost: nothing more is sent."""

    status = "cost-cap"


# Not a VhmineError (so no `except VhmineError` swallows it) but a KeyboardInterrupt: Ctrl-C during a stage,
# raised by the stage with what it kept and how to resume; the CLI prints `message` and exits 130.
class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a stage; `message` says what was kept and that the same command resumes."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# Not a VhmineError: an unusable image is data (a row with its reason), never a stop. Defined here, below both
# vhmine.images and vhmine.tars, which raise it; importable as vhmine.images.BadImage as before.
class BadImage(Exception):
    """An image that cannot be used; `reason` says why, in a few words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
