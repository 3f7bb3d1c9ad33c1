"""Decisions from data: route (failures -> routing.toml), gate (numeric probes), compare (A/B parity) and doctor
(endpoint fitness). Imports record, llm, stack, config; never the night or the report."""
