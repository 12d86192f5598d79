"""Slurm: the verdict cache and the `job_submit.lua` / `cli_filter.lua` plugins that read it."""
