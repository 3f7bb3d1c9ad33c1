"""Tasks: the format (`spec`) and the suite loaders (`suites`: builtin, humaneval, exercism:PATH, dir:PATH).
Imports errors, files, paths and python_ast."""
