"""OpenTelemetry traces of crew's runs (docs/observability.md): each run's record
(crewbridge.record) turned into GenAI spans — the run's `invoke_workflow`, each agent's part
`invoke_agent` (tokens, cost), every tool call `execute_tool` — exported over OTLP in the
background. `settings` decides from the standard OTEL_* variables and crew.yaml's `telemetry:`
whether it is on, without loading OpenTelemetry; `exporter` loads the SDK (the `otel` extra) on a
thread of its own once a run is traced; `spans` maps the record's events to spans."""
