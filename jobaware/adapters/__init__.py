"""The scheduler side, deployed beside a scheduler: it reaches the models only over HTTP (docs/architecture.md)."""
