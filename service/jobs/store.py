"""The jobs' Redis records: create, read, list, and every state change as one Lua script.

A job's record is the truth about it (rq only carries "run attempt n of job x" to a worker).
Every transition checks the state and the attempt it expects, so a late or duplicated message
(a lost worker's horse reporting after the job was requeued, a second reaper) changes nothing.
Times come from the Redis server clock (``TIME``), so hosts with skewed clocks agree.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from service.jobs import keys
from service.jobs.records import JobRecord, JobState
from service.redis_text import LUA_NOW, as_str
from service.settings import Settings

# KEYS: record, data. ARGV: retention ms, state, message, error, result
_END = """
local function finish(state, message, err, result, retention)
  redis.call('HSET', KEYS[1], 'state', state, 'finished_at', now, 'message', message)
  if err ~= '' then redis.call('HSET', KEYS[1], 'error', err) end
  if result ~= '' then redis.call('HSET', KEYS[1], 'result', result, 'fraction', '1') end
  redis.call('PEXPIRE', KEYS[1], retention)
  redis.call('DEL', KEYS[2])
end
"""

#: KEYS record. ARGV attempt, worker. -> state after the call ('running' if this attempt starts)
START = (
    LUA_NOW
    + """
local s = redis.call('HMGET', KEYS[1], 'state', 'attempt')
if not s[1] then return 'gone' end
if s[1] ~= 'queued' or s[2] ~= ARGV[1] then return s[1] end
redis.call('HSET', KEYS[1], 'state', 'running', 'heartbeat_at', now, 'worker', ARGV[2],
           'message', 'started (attempt ' .. ARGV[1] .. ')')
redis.call('HSETNX', KEYS[1], 'started_at', now)
return 'running'
"""
)

#: KEYS record. ARGV attempt, fraction ('' = heartbeat only), message.
#: -> 'ok', 'cancel' (stop: cancel requested) or 'lost' (this attempt no longer owns the job)
PROGRESS = (
    LUA_NOW
    + """
local s = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'cancel')
if s[1] ~= 'running' or s[2] ~= ARGV[1] then return 'lost' end
redis.call('HSET', KEYS[1], 'heartbeat_at', now)
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'fraction', ARGV[2], 'message', ARGV[3]) end
if s[3] == '1' then return 'cancel' end
return 'ok'
"""
)

#: KEYS record, data. ARGV attempt, retention ms, state, message, error, result -> new state
FINISH = (
    LUA_NOW
    + _END
    + """
local s = redis.call('HMGET', KEYS[1], 'state', 'attempt')
if s[1] ~= 'running' or s[2] ~= ARGV[1] then return s[1] or 'gone' end
finish(ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[2])
return ARGV[3]
"""
)

#: KEYS record, data. ARGV retention ms. -> 'cancelled', 'cancelling', or the unchanged state
CANCEL = (
    LUA_NOW
    + _END
    + """
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 'gone' end
if state == 'queued' then
  finish('cancelled', 'cancelled before it started', '', '', ARGV[1])
  return 'cancelled'
end
if state == 'running' then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  return 'cancelling'
end
return state
"""
)

#: KEYS record, data. ARGV attempt ('' = any), lost_after ms, retention ms, reason, active ttl ms.
#: A running attempt whose heartbeat is older than lost_after is lost: its job is requeued as
#: the next attempt while attempts are left, else failed (cancelled if a cancel was pending).
#: -> {'retry', attempt} | {'failed'} | {'cancelled'} | {'alive'} | {'unchanged', state}
REAP = (
    LUA_NOW
    + _END
    + """
local s = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'max_attempts', 'heartbeat_at', 'cancel')
if s[1] ~= 'running' then return {'unchanged', s[1] or 'gone'} end
if ARGV[1] ~= '' and s[2] ~= ARGV[1] then return {'alive'} end
if now - tonumber(s[4] or '0') < tonumber(ARGV[2]) then return {'alive'} end
local attempt, most = tonumber(s[2]), tonumber(s[3])
if s[5] == '1' then
  finish('cancelled', 'cancelled (its worker was lost)', '', '', ARGV[3])
  return {'cancelled'}
end
if attempt < most then
  redis.call('HSET', KEYS[1], 'state', 'queued', 'attempt', attempt + 1,
             'message', 'requeued: ' .. ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  return {'retry', attempt + 1}
end
finish('failed', 'failed', ARGV[4] .. ' (attempt ' .. attempt .. ' of ' .. most .. ')', '', ARGV[3])
return {'failed'}
"""
)


class JobStore:
    """Job records in Redis (no queue: see :class:`service.jobs.queue.JobQueue`)."""

    def __init__(self, client: redis.Redis, settings: Settings):
        self.redis = client
        self.settings = settings
        self._start = client.register_script(START)
        self._progress = client.register_script(PROGRESS)
        self._finish = client.register_script(FINISH)
        self._cancel = client.register_script(CANCEL)
        self._reap = client.register_script(REAP)

    @property
    def retention_ms(self) -> int:
        return int(self.settings.job_retention * 1000)

    @property
    def active_ttl_ms(self) -> int:
        """Expiry of a queued or running job's keys: every attempt's timeout, a day of queueing
        and the retention, so that nothing outlives a Redis that lost all its workers forever."""
        s = self.settings
        return int((s.job_max_attempts * s.job_timeout + 86400 + s.job_retention) * 1000)

    # -- records -----------------------------------------------------------------------------
    def create(
        self,
        job_id: str,
        kind: str,
        app: str | None,
        params: dict[str, Any],
        source: dict[str, Any],
        data: bytes | None,
        pipe: redis.client.Pipeline,
    ) -> None:
        """Queue the record (and the uploaded bytes) on ``pipe``, a MULTI the caller executes."""
        seconds, micros = self.redis.time()  # the clock of every other job time
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        pipe.hset(
            keys.record(job_id),
            mapping={
                "id": job_id,
                "kind": kind,
                "app": app or "",
                "params": json.dumps(params, sort_keys=True),
                "source": json.dumps(source, sort_keys=True),
                "state": JobState.queued.value,
                "fraction": "0",
                "message": "queued",
                "attempt": "1",
                "max_attempts": str(self.settings.job_max_attempts),
                "created_at": str(now_ms),
            },
        )
        pipe.pexpire(keys.record(job_id), self.active_ttl_ms)
        if data is not None:
            pipe.set(keys.data(job_id), data, px=self.active_ttl_ms)
        # listed newest first: microseconds, as two jobs often share a millisecond
        pipe.zadd(keys.JOBS, {job_id: int(seconds) * 1_000_000 + int(micros)})
        pipe.sadd(keys.ACTIVE, job_id)

    def get(self, job_id: str) -> JobRecord | None:
        raw = self.redis.hgetall(keys.record(job_id))
        return JobRecord.from_hash(raw) if raw else None

    def data(self, job_id: str) -> bytes | None:
        return self.redis.get(keys.data(job_id))

    def list(self, limit: int = 100, app: str | None = None) -> list[JobRecord]:
        """Newest first; ids whose record has expired are dropped from the index on the way."""
        found: list[JobRecord] = []
        start, batch = 0, max(limit, 100)
        while len(found) < limit:
            ids = [as_str(i) for i in self.redis.zrevrange(keys.JOBS, start, start + batch - 1)]
            if not ids:
                break
            pipe = self.redis.pipeline(transaction=False)
            for job_id in ids:
                pipe.hgetall(keys.record(job_id))
            gone = []
            for job_id, raw in zip(ids, pipe.execute(), strict=True):
                if not raw:
                    gone.append(job_id)
                    continue
                record = JobRecord.from_hash(raw)
                if app is None or record.app == app:
                    found.append(record)
            if gone:
                self.redis.zrem(keys.JOBS, *gone)
                start -= len(gone)
            start += batch
        return found[:limit]

    def active_ids(self) -> list[str]:
        return [as_str(i) for i in self.redis.smembers(keys.ACTIVE)]

    def forget_active(self, job_ids: list[str]) -> None:
        if job_ids:
            self.redis.srem(keys.ACTIVE, *job_ids)

    # -- transitions -------------------------------------------------------------------------
    def _keys(self, job_id: str) -> list[str]:
        return [keys.record(job_id), keys.data(job_id)]

    def start(self, job_id: str, attempt: int, worker: str) -> str:
        return as_str(self._start(keys=[keys.record(job_id)], args=[attempt, worker]))

    def progress(self, job_id: str, attempt: int, fraction: float | None, message: str) -> str:
        frac = "" if fraction is None else repr(min(1.0, max(0.0, float(fraction))))
        return as_str(self._progress(keys=[keys.record(job_id)], args=[attempt, frac, message]))

    def finish(
        self,
        job_id: str,
        attempt: int,
        state: JobState,
        message: str,
        error: str = "",
        result: Any = None,
    ) -> str:
        payload = "" if result is None else json.dumps(result, allow_nan=False)
        answer = self._finish(
            keys=self._keys(job_id),
            args=[attempt, self.retention_ms, state.value, message, error, payload],
        )
        return as_str(answer)

    def cancel(self, job_id: str) -> str:
        return as_str(self._cancel(keys=self._keys(job_id), args=[self.retention_ms]))

    def reap(
        self, job_id: str, reason: str, attempt: int | None = None, lost_after: float | None = None
    ) -> tuple[str, int | str | None]:
        """('retry', next attempt), ('failed' | 'cancelled' | 'alive', None) or
        ('unchanged', state of a job that is not running).

        Declare a running attempt lost if its heartbeat is older than ``lost_after`` seconds
        (default ``job_lost_after``; 0 with ``attempt``: its process is known to be dead)."""
        after = self.settings.job_lost_after if lost_after is None else lost_after
        answer = self._reap(
            keys=self._keys(job_id),
            args=[
                "" if attempt is None else attempt,
                int(after * 1000),
                self.retention_ms,
                reason,
                self.active_ttl_ms,
            ],
        )
        outcome = as_str(answer[0])
        if outcome == "retry":
            return outcome, int(answer[1])
        if outcome == "unchanged":  # not running: its state, e.g. 'queued', 'done', 'gone'
            return "unchanged", as_str(answer[1])
        return outcome, None
