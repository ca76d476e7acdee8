"""The agent core (seed 001 "Core Crate").

agent.py      Agent (the loaded aggregate), AgentStore (create/load/update/delete)
soul.py       Soul: social style, Big Five, thinking style, custom traits
identity.py   Identity: name, role, job, organisation, image
llm_config.py AgentLlmConfig: per-agent models, self-selection whitelist
memory.py     MemoryManager: curated memory, FTS session logs, impressions
skills.py     SkillManager: standard skill files + acquired skills
workspace.py  Workspace: the agent's jailed file space with a quota
engine.py     SkillEngine: the think-act loop, recorded as AgentEvents
steps.py      the typed steps a turn yields (TurnStarted … TurnResult)
context.py    the system context's sections, token estimates, history from events
discussion.py discussions between agents (autonomous, facilitated)
runtime.py    store + router + actions + skills + engine, assembled once
sessions.py   chat sessions; tools.py: tools granted to agents (agent_tools)
heartbeat.py  the heartbeat scheduler
"""
