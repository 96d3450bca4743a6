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
