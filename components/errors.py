"""Errors that mean "the data is bad", as opposed to a bug or a broken environment.

The CLI shows their message as is (it already names file, line, column and rule) and exits with its own code.
"""


class DataError(RuntimeError):
    """Input data that the pipeline refuses; nothing downstream ran and nothing was pushed."""


class UserCodeError(RuntimeError):
    """A user's own module file (preprocessing_fn, run_fn) that breaks TFX's contract, or a model it made that
    the steps after the Trainer cannot use; the message says what is missing, in one line."""
