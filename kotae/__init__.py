"""kotae: grounded, cited, verified answers for a live stream's chat."""

__version__ = "0.1.0"
