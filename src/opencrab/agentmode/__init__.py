"""Agent mode (seed 004): a request becomes a task DAG run by coding CLIs in tmux panes and git worktrees."""
