"""Decisions that call a model or a server: gate (numeric gates on the endpoint under test, its probe, the sessions a
server keeps warm), doctor (endpoint fitness, what the jail holds) and a judge model's second reading of a night's
claims. The pure analysis of records is in soak.decisions; the report reads that, never this.
Imports agent, llm, stack, sandbox, record, config, errors, files and paths; nothing imports it but the night and the
CLI."""
