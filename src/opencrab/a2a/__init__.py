"""A2A 1.0 (Agent2Agent): OpenCrab's agents served to other agents (server) and remote agents as tools (client)."""
