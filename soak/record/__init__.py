"""The run folder: its schema (row models of every CSV and run.json, written once), the append-only writers,
and the one reader every later stage uses (rows, DataFrames, finding runs). Imports errors, files and paths."""
