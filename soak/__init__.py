"""soak: overnight soak tests for self-hosted LLM stacks."""

__version__ = "0.1.0"
