"""The agent core (seed 001 "Core Crate").

agent.py      Agent (the loaded aggregate), AgentStore (create/load/update/delete)
soul.py       Soul: social style, Big Five, thinking style, custom traits
identity.py   Identity: name, role, job, organisation, image
llm_config.py AgentLlmConfig: per-agent models, self-selection whitelist
memory.py     MemoryManager: curated memory, FTS session logs, impressions
skills.py     SkillManager: standard skill files + acquired skills
workspace.py  Workspace: the agent's jailed file space with a quota
engine.py     SkillEngine: the think-act loop, recorded as AgentEvents
heartbeat.py  the heartbeat scheduler
"""
