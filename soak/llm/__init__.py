"""One OpenAI-compatible call, streamed and timed: TTFT, decode tok/s, usage, reasoning, retries, the stale
watchdog, and the integrity verdict on its tool calls. Imports config and record only."""
