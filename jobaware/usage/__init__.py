"""After the job: what a finished job used against what it asked for, and against what jobaware said before it ran.

- `measures`: the store's `usage` dict (what the Slurm collector and the HTCondor follower keep of each finished
  job), its efficiencies and node-hours, and the values to ask for next time;
- `jobs`: the rows of `jobaware report jobs` (one per job, arrays as one row with distributions), with what the
  job card's parts said before the run (`said`);
- `waste`: `jobaware report waste`, node-hours requested but unused and spent on failed jobs, per group;
- `page`: the self-contained HTML page of `report jobs --html`;
- `mail`: the end-of-job mail and the digest, as text; `spool`: a mail spool delivered over SMTP with retries.
"""
