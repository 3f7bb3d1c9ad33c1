"""The morning report: a pure function of run folders. `render` turns them into one self-contained HTML file
plus summary.json; `aggregate` (DataFrame -> DataFrame), `series`, `charts`, `headroom` (against the
stream watchdogs) and `build` make its parts.
Imports record (the reader), llm (tool-call vocabulary), decisions (a sweep's recommendation, rendered as
`soak sweep` decided it), files and paths; nothing runs a model here."""
