"""The run index: every figure of every step of every run, with its plan, versions, machine and time, kept in a
database where runs accumulate (SQLite, a file needing no server, or a team's PostgreSQL), so that CI compares
tonight's run with the last thirty without keeping their folders. `loadtest run --index URL` adds the run it
made (after its folder is written: a failed write loses nothing on disk), `loadtest index URL RUN...` adds runs
already on disk, `loadtest history --index URL` reads them back. db.py is the one adapter to both databases,
schema.py the versioned tables and their migrations, store.py the writes and reads."""
