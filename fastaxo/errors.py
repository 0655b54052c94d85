"""Errors raised by fastaxo.

Every error derives from :class:`FastaxoError` and also from the builtin exception a
caller would naturally catch, so ``except ValueError`` and ``except FastaxoError`` both
work. Messages name the argument, what was expected and what was given.
"""

from __future__ import annotations

__all__ = [
    "FastaxoError",
    "InvalidInputError",
    "InvalidTypeError",
    "ColumnNotFoundError",
    "NullValueError",
    "CapacityError",
    "SequenceTooLongError",
    "RowTooLargeError",
    "ChatTemplateError",
    "TemplateLimitError",
    "ExtensionUnavailableError",
    "SourceNotFoundError",
    "FileFormatError",
    "SchemaMismatchError",
    "KernelError",
    "UnsupportedVersionError",
]


class FastaxoError(Exception):
    """Base class of every fastaxo error."""


class InvalidInputError(FastaxoError, ValueError):
    """An argument has the right type but a wrong value (shape, range, layout)."""


class InvalidTypeError(FastaxoError, TypeError):
    """An argument has a type fastaxo does not accept."""


class ColumnNotFoundError(FastaxoError, KeyError):
    """A requested column does not exist in the table."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class NullValueError(InvalidInputError):
    """A null where the input's encoding has no representation for it."""


class CapacityError(FastaxoError, OverflowError):
    """A size exceeds what a structure can hold."""


class SequenceTooLongError(InvalidInputError):
    """A sequence is longer than the packed row (or padded width) and no lossy option was
    chosen. ``row`` is its index, ``length`` its token count, ``max_length`` the limit.
    :meth:`of` writes the message every caller uses."""

    def __init__(self, message: str, row: int, length: int, max_length: int | None):
        super().__init__(message)
        self.row, self.length, self.max_length = row, length, max_length

    @classmethod
    def of(cls, where: str, row: int, length: int, max_length: int, *, fix: str,
           longer: int = 1) -> SequenceTooLongError:
        """The error for the row at ``where`` (its name in the input, e.g. ``"lengths row
        3"``): its length, the limit, how many rows in all are longer (``longer``), and
        ``fix``, the options that handle such rows (said in the caller's terms: keyword
        arguments or CLI flags)."""
        more = f"; {longer:,} rows are longer" if longer > 1 else ""
        return cls(f"{where} has {length:,} tokens; max_length is {max_length:,}{more}. {fix}",
                   row, length, max_length)

    def __reduce__(
        self,
    ):  # picklable with its fields (errors cross processes: Ray, multiprocessing)
        return (type(self), (self.args[0], self.row, self.length, self.max_length))


class RowTooLargeError(SequenceTooLongError):
    """A row's text (or a conversation's rendered text) is larger than ``max_row_bytes``: it is
    refused before it reaches a tokenizer, unless the overflow option drops it. ``row`` is its
    index, ``length`` its size and ``max_row_bytes`` the bound, both in UTF-8 bytes
    (``max_length`` is None: no token count was reached)."""

    def __init__(self, message: str, row: int, length: int, max_row_bytes: int):
        super().__init__(message, row, length, None)
        self.max_row_bytes = max_row_bytes

    def __reduce__(self):
        return (type(self), (self.args[0], self.row, self.length, self.max_row_bytes))


class ChatTemplateError(InvalidInputError):
    """A chat template cannot be used, or failed on a conversation: a syntax error, an error the
    template raised (``raise_exception``), a rule of the sandbox, a recursion without end, or
    more steps, or a bigger string, than fastaxo's bounds allow."""


class TemplateLimitError(ChatTemplateError):
    """A chat template took more steps (loop items, macro calls) than ``max_steps``, or one of
    its constant expressions or ``**`` would build more than fastaxo's bounds allow."""


class ExtensionUnavailableError(FastaxoError, ImportError):
    """The compiled extension is required (FASTAXO_REQUIRE_EXTENSION=1) but did not load."""


class SourceNotFoundError(FastaxoError, FileNotFoundError):
    """A path, directory or glob given as a reader's ``source`` names no readable file."""


class FileFormatError(InvalidInputError):
    """A file cannot be read as its format: corrupt, truncated, or not that format.
    ``path`` is the file, ``location`` where in it (``"row group 3"``, ``"line 1207"``, ...)."""

    def __init__(self, message: str, path: str, location: str | None = None):
        super().__init__(message)
        self.path, self.location = path, location

    def __reduce__(self):
        return (type(self), (self.args[0], self.path, self.location))


class SchemaMismatchError(InvalidInputError):
    """Files of one source do not share a schema (column names, order and types)."""


class KernelError(FastaxoError, RuntimeError):
    """A compiled kernel returned a status the checks before it should have ruled out: a bug in
    fastaxo, to be reported. ``kernel``, ``status`` and ``item`` say where."""

    def __init__(self, message: str, kernel: str = "", status: int = 0, item: int = -1):
        super().__init__(message)
        self.kernel, self.status, self.item = kernel, status, item

    def __reduce__(self):
        return (type(self), (self.args[0], self.kernel, self.status, self.item))


class UnsupportedVersionError(FastaxoError, RuntimeError):
    """An installed package is at a version fastaxo does not support (Axolotl, for the plugin):
    the message names the versions supported and the one found."""
