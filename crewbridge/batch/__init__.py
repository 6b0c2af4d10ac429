"""`crew batch`: one task across many repositories, each repository one durable DBOS workflow.

- crewbridge.batch.spec: what a batch is (its task, options and repositories), read from the
  command line and checked before anything starts.
- crewbridge.batch.repos: one repository on this machine: its clone (for a URL), the worktree an
  attempt works in, the commit, the push.
- crewbridge.batch.workflow: the DBOS workflow of one repository and its steps.
- crewbridge.batch.store: DBOS itself: its system database (SQLite in crew's state folder, or
  Postgres), this process as an executor, the batch's queue, recovery of dead executors' work.
- crewbridge.batch.report: what a person sees (progress, the summary table) and the --json object.

Only the CLI and crewbridge.batch.store load DBOS (an optional extra: pip install 'crewbridge[batch]').
"""
