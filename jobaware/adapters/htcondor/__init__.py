"""The HTCondor adapter: follow a schedd's event log, decide each new hold over HTTP, act by a stated policy."""
