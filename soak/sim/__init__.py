"""A fault-injecting OpenAI-compatible server with scenarios, standing in for a model in tests and rehearsals.
Imports tasks (its scripted coder writes their references), config, errors, files and python_ast; nothing of the
harness."""
