"""soak: overnight soak tests for self-hosted LLM stacks.

Each stage is a subpackage whose docstring says what it owns and, in one sentence "Imports a, b and c.", every
other stage and base module it imports. The base modules import only one another: config, errors, files, paths,
python_ast and venvs. The CLI (cli) imports anything, and nothing imports it. No stage or base module imports
itself back through others. tests/test_layers.py holds the code to all of this."""

__version__ = "0.1.0"
