"""Batch jobs: a Redis-backed queue (rq) of jobs such as feature selection, run by
``grove worker`` processes. New kinds go in :data:`service.jobs.kinds.KINDS`."""
