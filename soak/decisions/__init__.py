"""Decisions from data: route (failures -> routing.toml), gate (numeric probes), compare (A/B parity), doctor
(endpoint fitness, what the jail holds), sweep (a sweep's standings and recommendation) and a judge model's second
reading of a night's claims. Imports record, llm, stack, sandbox, agent, config, errors, files and paths; never the
night or the report."""
