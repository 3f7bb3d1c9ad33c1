"""Decisions from data: route (failures -> routing.toml), gate (numeric probes), compare (A/B parity), doctor
(endpoint fitness, what the jail holds), sweep (a sweep's standings and recommendation), a judge model's second
reading of a night's claims, the course of a night (did it hold up: windows, change points and drift, a verdict,
what a night that held could have seen), how repeatable it was (repeats: pass^k, flaky tasks) and what a solved task
cost (energy: joules and money per pass).
Imports record, tasks, llm, stack, sandbox, agent, config, errors, files and paths; never the night or the report."""
