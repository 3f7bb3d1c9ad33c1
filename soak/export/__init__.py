"""A run's attempts for other tools: each finished attempt as a trajectory of Harbor's Agent Trajectory Interchange
Format (ATIF), plus an index; a pure function of the run folder, read through the record stage's one reader, like
the report. Imports record, llm, config, errors, files and paths."""
