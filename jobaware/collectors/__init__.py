"""Collectors that gather job records from live schedulers."""
