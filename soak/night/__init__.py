"""One night: the loop (deadline, cycles, lanes, error budget, signals), its wiring to the stack, telemetry and
exporter, progress, the run's plan (flags + soak.toml + routing + embedded default -> config, tasks, run.json), its
lifecycle (new, resume, detach, status, stop, list), the trial of one task, the sweep (one night per stack
configuration, in turn) and attempts on a Ray cluster (`--cluster`). Imports agent, decisions, probes, report, stack,
llm, sandbox, tasks, record, config, errors, files and paths; nothing imports it but the CLI."""
