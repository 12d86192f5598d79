"""BentoML services, one per capability."""
