"""The canonical Slurm job table, shared by the capabilities that learn from Slurm's jobs: its schema and bounds
(`schema`), the record-accountable conversion of raw columns onto it (`common`), and the reader of NREL Eagle's
published files, CSV, JSON and Parquet (`nrel`)."""
