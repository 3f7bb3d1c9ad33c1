"""soak: overnight soak tests for self-hosted LLM stacks.

Each stage is a subpackage whose docstring says what it owns and, in one sentence "Imports a, b and c.", every
other stage and base module it imports. The stages, lowest first: record, tasks, llm, sandbox, stack, sim, agent,
decisions, report, export, probes and night; a stage imports only base modules and stages before it, whatever its
docstring lists, so the report reads the analysis of records (decisions) and never runs a probe. The base modules
import only one another: config, errors, files, paths, python_ast and venvs. The CLI (cli) imports anything, and
nothing imports it. No stage or base module imports itself back through others. No module is longer than 450 lines.
tests/test_layers.py holds the code to all of this."""

__version__ = "0.1.0"
