"""The run folder: its schema (row models of every CSV and run.json, written once), the append-only writers,
the one reader every later stage uses (rows, DataFrames, finding runs) and the one per-problem table (summary).
Imports errors, files and paths."""
