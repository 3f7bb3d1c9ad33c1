"""soak's own orchestrator -> coder delegation loop: its tools, rounds, budgets and the attempt's outcome.
Imports llm, sandbox, tasks, config and record; never the night or the stack."""
