"""Import of coding-agent transcripts (Codex CLI rollouts, Claude Code sessions), and the
token usage alone of Gemini CLI's chats and OpenCode's sessions."""
