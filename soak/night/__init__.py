"""One night: the loop (deadline, cycles, lanes, error budget, signals), its wiring to the stack, telemetry and
exporter, progress, the run's plan (flags + soak.toml + routing + embedded default -> config, tasks, run.json), its
lifecycle (new, resume, detach, status, stop, list) and the sweep (one night per stack configuration, in turn).
Imports every lower stage (agent, sandbox, stack, llm, tasks, record, config); nothing imports it but the CLI."""
