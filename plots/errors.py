"""Errors the plotting package reports to users as one line (``python -m plots`` exits with status 2)."""


class PlotError(ValueError):
    """Bad input for a figure: a missing folder, an unreadable CSV, an unknown format.

    The message is one line and names the offending path or value.
    """


class MissingColumnError(PlotError):
    """A CSV lacks a column a figure needs; the message names the column and the file.

    Attributes:
        column: the missing column's name.
        path: the CSV file (``pathlib.Path``) that lacks it.
    """

    def __init__(self, column, path):
        self.column = column
        self.path = path
        super().__init__(f"{path}: missing required column '{column}'")


class FigureError(PlotError):
    """One or more figures of an experiment could not be drawn; every other figure was drawn.

    The message is one line per failed figure, ``<experiment folder>: figure <name> not drawn: <reason>``.

    Attributes:
        written: the files that were drawn (``pathlib.Path``), in drawing order.
        failures: ``[(figure name, reason)]``, the reason being ``<ExceptionType>: <first line of its message>``.
        exceptions: the exception of each failure, in the same order.
        bad_input: True when every failure is a :class:`PlotError` (bad or missing data, not a bug).
    """

    def __init__(self, folder, written, failures, exceptions):
        self.folder = folder
        self.written = list(written)
        self.failures = list(failures)
        self.exceptions = list(exceptions)
        self.bad_input = all(isinstance(e, PlotError) for e in self.exceptions)
        super().__init__("\n".join(f"{folder}: figure {name} not drawn: {why}" for name, why in self.failures))
