"""Tasks: the format (`spec`), the suite loaders (`suites`: builtin, humaneval, exercism:PATH, dir:PATH) and the
canary twins a night mixes in (`canary`). Imports errors, files, paths and python_ast."""
