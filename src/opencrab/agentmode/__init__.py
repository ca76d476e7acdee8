"""Agent mode (seed 004): a request as a task DAG run by coding CLIs in tmux and worktrees."""
