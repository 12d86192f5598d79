"""Scheduler adapters, deployed beside a scheduler; they reach models only over HTTP."""
