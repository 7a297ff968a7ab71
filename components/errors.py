"""Errors that mean "the data is bad", as opposed to a bug or a broken environment.

The CLI shows their message as is (it already names file, line, column and rule) and exits with its own code.
"""


class DataError(RuntimeError):
    """Input data that the pipeline refuses; nothing downstream ran and nothing was pushed."""
