"""The model servers: starting, health-checking and restarting them, the real engines and the embedded
default, and the telemetry samplers (host memory, server RSS, GPU, `/metrics`, energy: NVML, RAPL, the server
host's exporter). Imports config, record, errors, files and venvs."""
