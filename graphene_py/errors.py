"""Exception types. Every user-facing failure is a GrapheneError with a message fit to print."""


class GrapheneError(Exception):
    """Base class: the CLI prints `Error: <message>` and exits 1."""


class InputFormatError(GrapheneError):
    """Bad input file. Message form: `FILE:LINE: <what> (<offending text>)`."""

    def __init__(self, path, line, what, text=None):
        self.path, self.line, self.what, self.text = path, line, what, text
        loc = f"{path}:{line}" if line is not None else f"{path}"
        msg = f"{loc}: {what}"
        if text is not None:
            t = text if len(text) <= 80 else text[:77] + "..."
            if isinstance(t, str) and not t.isprintable():
                # control bytes (a binary file read as text) shown escaped, not sent to the
                # terminal as they are
                t = t.encode("unicode_escape").decode("ascii")
            msg += f" ({t!r})" if not isinstance(t, str) else f" ({t})"
        super().__init__(msg)


class DatasetError(GrapheneError):
    """A dataset is missing, inconsistent (disks disagree, files missing or of the wrong size) or corrupt."""


class GrapheneIOError(GrapheneError):
    """An IO failure while reading a dataset: names disk, file, offset and length."""


class VerificationError(GrapheneError):
    """A result failed verification (CLI exit code 3)."""
