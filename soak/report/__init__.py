"""The morning report: a pure function of run folders. `render` turns them into one self-contained HTML file
plus summary.json; `aggregate` (DataFrame -> DataFrame), `charts`, `headroom` (against the stream watchdogs)
and `build` make its parts.
Imports record (the reader and its time series), llm (tool-call vocabulary), decisions (a sweep's recommendation,
rendered as `soak sweep` decided it; the course of the night and its repeats; what a solved task cost), files and
paths; nothing runs a model here."""
