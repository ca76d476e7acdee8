"""Repositories: one module per aggregate, the only code that imports the table definitions.

agents (agents with persona, skills, tools, grants, LLM config, API tokens), sessions
(sessions with their messages), events (the AgentEvent log's rows), memory (session
logs, impressions, search), metrics (llm_usage_metrics), imports (imported
transcripts). Each returns typed values; callers above the store (core, actions, llm,
importers, server) call these functions and never build SQL against the tables.
Dialect specifics live in `opencrab.store.dialects`.
"""
