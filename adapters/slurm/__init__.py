"""Slurm: the collector that keeps a cluster's jobs in the job store."""
