"""Slurm: the collector that keeps a cluster's jobs in the job store, the adapter that writes verdicts back,
and the verdict cache with the `job_submit.lua` / `cli_filter.lua` plugins that read it."""
