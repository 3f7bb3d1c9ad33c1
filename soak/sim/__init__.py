"""A fault-injecting OpenAI-compatible server with scenarios, standing in for a model in tests and rehearsals.
Imports tasks (its scripted coder writes their references), config and errors; nothing of the harness."""
