"""The run folder, owned whole: the attempt's identity (AttemptId), its layout (every path in it), its schema (row
models of every CSV and run.json, its routing, stack and host in info, written once; SCHEMA_VERSION and what an
older folder still does) and a sweep's (sweeps), the transcript line, the append-only writers, the one reader every
later stage uses (rows, DataFrames, run.json, one attempt whole with its calls paired to its transcript lines, the
rounds of a folder older than rounds.csv, finding runs), the one per-problem table (summary) and the telemetry's time
series (series). Imports config, errors, files and paths."""
