"""Attempts: soak's own orchestrator -> coder delegation loop (its rounds, budgets, the tools it runs and the
attempt's outcome) and external agents (their adapters, the recording proxy between them and the model, the bridge
into the jail). Imports llm, sandbox, tasks, record, config, errors and venvs; never the night or the stack."""
