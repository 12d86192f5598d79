"""jobaware: job awareness for HPC schedulers."""

__version__ = "0.1.0"
