"""Tasks: the format (`spec`) and the suite loaders (`suites`: builtin, humaneval, exercism:PATH, dir:PATH).
Imports config, errors, files and paths."""
