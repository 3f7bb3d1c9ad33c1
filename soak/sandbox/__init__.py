"""Containment and judging: the jail (namespaces, rlimits, scrubbed env, wall clock, cleanup), the judge
(workspace, pytest, the count check, the verdict), the pytest plugin that runs inside the jail, the static scan for
reward-hack signatures, the allow-list of what a jail sees (and its builder without bubblewrap), and the proof that
a suite's references pass and its wrong solutions fail. Imports tasks, errors, paths and python_ast."""
