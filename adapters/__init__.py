"""The scheduler side: adapters deployed beside a scheduler, reaching the models only over HTTP."""
