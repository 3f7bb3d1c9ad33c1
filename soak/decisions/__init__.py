"""Decisions from data: route (failures -> routing.toml), gate (numeric probes), compare (A/B parity), doctor
(endpoint fitness, what the jail holds) and sweep (a sweep's standings and recommendation). Imports record, llm,
stack, sandbox, config, errors, files and paths; never the night or the report."""
