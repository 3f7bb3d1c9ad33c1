"""Containment and judging: the jail (namespaces, a cgroup or rlimits, scrubbed env, wall clock, cleanup), what a
run leaves on disk (`disk`, walked at any depth), the judge (workspace, pytest, the count check, the verdict), the
result channel's events, the pytest plugin that runs inside the jail, the static scan for reward-hack signatures
(and the signatures), what an attempt touched of its tests, the allow-list of what a jail sees (and its builder
without bubblewrap), and the proof that a suite's references pass and its wrong solutions fail. Imports record,
tasks, errors, paths and python_ast."""
