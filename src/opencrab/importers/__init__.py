"""Import of coding-agent transcripts (Codex CLI rollouts, Claude Code sessions)."""
