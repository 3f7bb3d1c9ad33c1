"""One OpenAI-compatible call, streamed and timed: TTFT, decode tok/s, usage, reasoning, retries, the stale
watchdog, and the integrity verdict on its tool calls; `tools` holds the schemas soak's own loop offers, `scripted`
a ChatModel of canned replies that makes the same rows, for driving the loop without a server.
Imports config and record."""
