"""Errors the planner raises for bad input; each message is one line a person can act on."""


class MigplanInputError(ValueError):
    """Bad input from a user or a file: the CLI prints the message and exits with code 2."""


class CatalogError(MigplanInputError):
    """A profile file is missing, unreadable or breaks the schema."""


class UnknownModelError(MigplanInputError):
    """No catalog model matches the given key or product name."""


class UnknownProfileError(MigplanInputError):
    """A profile name is not one of the model's profiles."""


class LayoutSyntaxError(MigplanInputError):
    """A layout string is not of the form `profile@start+profile@start` (or `-`)."""
