"""A fault-injecting OpenAI-compatible server with scenarios, standing in for a model in tests and rehearsals; and
nights of known truth, written as run folders (nights), that measure the course of the night.
Imports record, tasks (its scripted coder writes their references), config, errors, files and python_ast; nothing of the
harness."""
