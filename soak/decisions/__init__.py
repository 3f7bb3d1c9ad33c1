"""Decisions from records, pure analysis that calls no model: route (failures -> routing.toml), compare (A/B
parity), sweep (a sweep's standings and recommendation) and capacity (its knee), the course of a night (did it hold
up: windows, change points and drift, a verdict, what a night that held could have seen), how repeatable it was
(repeats: pass^k, flaky tasks) and what a solved task cost (energy: joules and money per pass). What calls a model or a
server to decide is in soak.probes.
Imports record, tasks, stack, config, errors, files and paths; never the night, the report or the probes."""
