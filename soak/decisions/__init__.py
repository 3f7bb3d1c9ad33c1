"""Decisions from data: route (failures -> routing.toml), gate (numeric probes), compare (A/B parity), doctor
(endpoint fitness) and sweep (a sweep's standings and recommendation). Imports record, llm, stack, config, errors,
files and paths; never the night or the report."""
