"""DescribeError, in a module of its own so that importing it needs no torch."""


class DescribeError(ValueError):
    """Bad arguments to describe (the CLI turns it into exit code 2)."""
