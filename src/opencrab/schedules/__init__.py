"""Schedules (issue 37): an agent's cron, interval and one-shot jobs, each slot run once
across every process (spec: timing and action; service: the rules every entry point
calls; scheduler: claiming and running slots by lease; runs: what a run does; actions:
`schedule_task`, an agent scheduling itself)."""
