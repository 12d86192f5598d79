"""The scheduler side, deployed beside a scheduler: it reaches models only over HTTP (see DESIGN.md)."""
