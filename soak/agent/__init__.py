"""Attempts: the attempt core (rounds, budgets, judging, the outcome) and its two drivers, soak's own orchestrator ->
coder delegation loop with the tools it runs, and external agents (their adapters, the recording proxy between them
and the model, the bridge into the jail). Imports llm, sandbox, tasks, record, config, errors and venvs; never the
night or the stack."""
