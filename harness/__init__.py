"""Helpers shared by the tests and the benchmarks (neither imports the other): a one-node Slurm cluster, the most
expensive valid request of every endpoint, plain reference implementations, free ports and stopping servers."""
