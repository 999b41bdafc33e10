"""Lua scripts: every multi-key change of an app happens in one of these, atomically.

All keys passed to one script belong to one app (hash tag ``{app}``). Each script first checks
that the app still exists with the same ``uid`` (so nothing is written into a deleted app, or
into a new app that reused the name), and reads the clock from Redis (``TIME``) so that API
processes and trainers on different hosts agree on deadlines.
"""

from __future__ import annotations

import redis

from service.redis_text import LUA_NOW

_SAME_APP = """
if redis.call('HGET', KEYS[1], 'uid') ~= ARGV[1] then return {'gone'} end
"""

# The API caches an app's config per process, keyed by the config hash's 'rev' (bumped by every
# write of its json): the scripts of the request path check that the caller decided with the
# current config, or answer 'stale' (the caller re-reads it and tries again). ARGV[1] is
# '<uid>' (no check of the rev: callers that just read the config) or '<uid>:<rev>'.
_SAME_CONFIG = """
local cfg = redis.call('HMGET', KEYS[1], 'uid', 'rev')
local want_uid, want_rev = string.match(ARGV[1], '^([^:]*):?(.*)$')
if cfg[1] ~= want_uid then return {'gone'} end
if want_rev ~= '' and (cfg[2] or '0') ~= want_rev then return {'stale'} end
"""

# KEYS: config, snapshot, stats, stream, deadlines, lease
# ARGV: uid, config json, initial state bytes, initial serving-state bytes
CREATE_APP = (
    """
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
"""
    + LUA_NOW
    + """
redis.call('HSET', KEYS[1], 'uid', ARGV[1], 'json', ARGV[2])
redis.call('HSET', KEYS[2], 'version', 0, 'offset', '0-0', 'eventsLearned', 0,
           'eventsRejected', 0, 'updatedAt', now, 'state', ARGV[3], 'serving', ARGV[4],
           'stateOffset', '0-0', 'stateLearned', 0, 'stateRejected', 0)
return {'ok'}
"""
)

# KEYS: config, deadlines, stats, snapshot, record 1..n, answer 1..n
# ARGV: uid[:rev], grace ms, wait ms, repeat window ms, then per record: eventId, deferred (0|1),
#       context, action, probability, modelVersion, offered (packed action ids; empty: the
#       app's actions), actionFeatures (packed {action id: features} of the offered actions;
#       empty: none), baseline (Personalizer's Apprentice mode: the action the client shows;
#       empty: none), answer (the request's digest, service.records.REQUEST_DIGEST = 16
#       bytes, then its ranking packed; empty: not kept)
# -> {'ok', deadline, current model version} (the API loads a newer snapshot in the background)
#
# A request repeated (a client's retry after an answer it did not get: a 503 whose write had
# happened, a lost connection) finds its records. If each one is still waiting for its reward
# (not rewarded, not activated, before its deadline) and its answer is kept (in the answer
# key, for the repeat window, when the client named the eventId: a Grove-made one cannot be
# repeated) for a request of the same digest (the client's request: context, actions,
# exclusions, features, baseline, deferral, of every record of a batch), nothing is written
# and the first answers are given again:
# -> {'repeat', current model version, then per record: action, probability, modelVersion,
#     ranking}
# else {'conflict', index of the first record that exists}.
DECIDE = (
    _SAME_CONFIG
    + LUA_NOW
    + """
local n = (#KEYS - 4) / 2
local first = nil
for i = 5, 4 + n do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    first = first or i
  elseif first then return {'conflict', first - 5} end
end
if first then
  if first > 5 then return {'conflict', first - 5} end
  local answer = {'repeat', redis.call('HGET', KEYS[4], 'version') or '0'}
  for i = 5, 4 + n do
    local b = 5 + (i - 5) * 10
    local rec = redis.call('HMGET', KEYS[i], 'state', 'deadline', 'rewardCount', 'action',
                           'probability', 'modelVersion')
    local kept = redis.call('GET', KEYS[i + n])
    local state = 'pending'
    if ARGV[b + 1] == '1' then state = 'deferred' end
    if not kept or #ARGV[b + 9] < 16 or string.sub(kept, 1, 16) ~= string.sub(ARGV[b + 9], 1, 16)
       or rec[1] ~= state or now >= tonumber(rec[2]) or rec[3] ~= '0' then
      return {'conflict', i - 5}
    end
    for _, v in ipairs({rec[4], rec[5], rec[6], string.sub(kept, 17)}) do
      answer[#answer + 1] = v
    end
  end
  return answer
end
local grace, deadline = tonumber(ARGV[2]), now + tonumber(ARGV[3])
local window = math.min(tonumber(ARGV[4]), tonumber(ARGV[3]))
for i = 5, 4 + n do
  local b = 5 + (i - 5) * 10
  local state = 'pending'
  if ARGV[b + 1] == '1' then state = 'deferred' end
  redis.call('HSET', KEYS[i], 'context', ARGV[b + 2], 'action', ARGV[b + 3],
             'probability', ARGV[b + 4], 'modelVersion', ARGV[b + 5], 'state', state,
             'decidedAt', now, 'deadline', deadline, 'rewardSum', 0, 'rewardCount', 0)
  if ARGV[b + 6] ~= '' then redis.call('HSET', KEYS[i], 'offered', ARGV[b + 6]) end
  if ARGV[b + 7] ~= '' then redis.call('HSET', KEYS[i], 'actionFeatures', ARGV[b + 7]) end
  if ARGV[b + 8] ~= '' then
    redis.call('HSET', KEYS[i], 'baseline', ARGV[b + 8])
    redis.call('HINCRBY', KEYS[3], 'apprenticeDecisions', 1)
    if ARGV[b + 8] == ARGV[b + 3] then redis.call('HINCRBY', KEYS[3], 'apprenticeMatches', 1) end
  end
  if ARGV[b + 9] ~= '' and window > 0 then
    redis.call('SET', KEYS[i + n], ARGV[b + 9], 'PX', window)
  end
  redis.call('PEXPIREAT', KEYS[i], deadline + grace)
  redis.call('ZADD', KEYS[2], deadline, ARGV[b])
end
redis.call('HINCRBY', KEYS[3], 'decisions', n)
return {'ok', tostring(deadline), redis.call('HGET', KEYS[4], 'version') or '0'}
"""
)

# a decision record's fields, read by ``read_record(key)`` in the order ``rec[i]`` reads them
_RECORD_FIELDS = """
local function read_record(key)
  return redis.call('HMGET', key, 'state', 'deadline', 'context', 'action', 'probability',
                    'modelVersion', 'decidedAt', 'rewardSum', 'rewardCount', 'offered',
                    'actionFeatures', 'aggregation', 'baseline')
end
"""

# the learning stream's entry of a decision record ``rec`` (read by read_record), its reward
# and the reward's source; the actions offered and their features only when the record has
# them. A record of Personalizer's Apprentice mode (its 'baseline': the action the client
# showed) learns the policy's own draw as learning-loop's joiner does: the reward the client
# reports when the draw is the baseline, else the app's default reward ``default``, the
# reported one kept as 'observed' (service.personalizer.configuration explains the choice).
_EVENT_ENTRY = """
local function event_entry(event_id, rec, reward, source, default)
  local observed = nil
  if rec[13] and rec[13] ~= rec[4] then
    observed, reward, source = reward, default, 'apprentice'
  end
  local entry = {'eventId', event_id, 'context', rec[3], 'action', rec[4],
                 'probability', rec[5], 'reward', reward, 'source', source,
                 'modelVersion', rec[6], 'decidedAt', rec[7]}
  if rec[10] then
    entry[#entry + 1] = 'offered'
    entry[#entry + 1] = rec[10]
  end
  if rec[11] then
    entry[#entry + 1] = 'actionFeatures'
    entry[#entry + 1] = rec[11]
  end
  if rec[13] then
    entry[#entry + 1] = 'baseline'
    entry[#entry + 1] = rec[13]
  end
  if observed then
    entry[#entry + 1] = 'observed'
    entry[#entry + 1] = observed
  end
  return entry
end
"""

# KEYS: config, record, deadlines, stream, stats
# ARGV: uid[:rev], eventId, reward, aggregation (earliest|sum|average), default reward
REWARD = (
    _SAME_CONFIG
    + _RECORD_FIELDS
    + _EVENT_ENTRY
    + """
local rec = read_record(KEYS[2])
-- a reward for an eventId unknown or past its wait is counted ('unmatched'): Personalizer's
-- routes answer it 204, and this count is what tells an operator that rewards are lost
if not rec[1] then
  redis.call('HINCRBY', KEYS[5], 'unmatched', 1)
  return {'missing'}
end
"""
    + LUA_NOW
    + """
if now >= tonumber(rec[2]) then
  redis.call('HINCRBY', KEYS[5], 'unmatched', 1)
  return {'expired'}
end
if rec[1] == 'deferred' then return {'deferred'} end
if rec[1] == 'rewarded' then return {'duplicate'} end
if ARGV[4] == 'sum' or ARGV[4] == 'average' then
  local total = redis.call('HINCRBYFLOAT', KEYS[2], 'rewardSum', ARGV[3])
  local count = redis.call('HINCRBY', KEYS[2], 'rewardCount', 1)
  -- (the record says how it is learned: the app's setting may change before its deadline)
  if count == 1 then redis.call('HSET', KEYS[2], 'aggregation', ARGV[4]) end
  return {'added', tostring(total), tostring(count)}
end
local id = redis.call('XADD', KEYS[4], '*',
                      unpack(event_entry(ARGV[2], rec, ARGV[3], 'reward', ARGV[5])))
redis.call('HSET', KEYS[2], 'state', 'rewarded', 'rewardSum', ARGV[3], 'rewardCount', 1)
-- kept until its deadline so that a second reward is told 409, not 404
redis.call('PEXPIREAT', KEYS[2], tonumber(rec[2]))
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('HINCRBY', KEYS[5], 'rewarded', 1)
return {'joined', id}
"""
)

# KEYS: config, record, deadlines
# ARGV: uid[:rev], eventId, wait ms, grace ms
ACTIVATE = (
    _SAME_CONFIG
    + """
local rec = redis.call('HMGET', KEYS[2], 'state', 'deadline')
if not rec[1] then return {'missing'} end
"""
    + LUA_NOW
    + """
if now >= tonumber(rec[2]) then return {'expired'} end
if rec[1] ~= 'deferred' then return {'active'} end
local deadline = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[2], 'state', 'pending', 'deadline', deadline)
redis.call('PEXPIREAT', KEYS[2], deadline + tonumber(ARGV[4]))
redis.call('ZADD', KEYS[3], deadline, ARGV[2])
return {'activated', tostring(deadline)}
"""
)

# KEYS: config, deadlines, stream, stats, record 1..n
# ARGV: uid, default reward, eventId 1..n
EXPIRE = (
    _SAME_APP
    + _RECORD_FIELDS
    + _EVENT_ENTRY
    + LUA_NOW
    + """
local learned, dropped = 0, 0
for i = 5, #KEYS do
  local event_id = ARGV[i - 2]
  local deadline = redis.call('ZSCORE', KEYS[2], event_id)
  if deadline and tonumber(deadline) <= now then
    local rec = read_record(KEYS[i])
    if rec[1] == 'pending' then
      local reward, source, counter = ARGV[2], 'default', 'defaulted'
      if tonumber(rec[9]) > 0 then reward, source, counter = rec[8], 'sum', 'rewarded' end
      if tonumber(rec[9]) > 0 and rec[12] == 'average' then
        reward = string.format('%.17g', tonumber(rec[8]) / tonumber(rec[9]))
        source = 'average'
      end
      redis.call('XADD', KEYS[3], '*', unpack(event_entry(event_id, rec, reward, source, ARGV[2])))
      redis.call('HINCRBY', KEYS[4], counter, 1)
      learned = learned + 1
    elseif rec[1] == 'deferred' then
      -- never activated: not shown to the user, so not learned
      redis.call('HINCRBY', KEYS[4], 'dropped', 1)
      dropped = dropped + 1
    elseif not rec[1] then
      -- record outlived its grace period with no trainer around
      redis.call('HINCRBY', KEYS[4], 'lost', 1)
    end
    if rec[1] ~= 'rewarded' then redis.call('DEL', KEYS[i]) end
    redis.call('ZREM', KEYS[2], event_id)
  end
end
return {'ok', learned, dropped}
"""
)

# KEYS: config, stream, stats, label marker
# ARGV: uid[:rev], eventId, context, label (0|1), ms to remember the client's eventId (0: a
#       Grove-made id, nothing to remember)
# A labeled event of a supervised kind (POST /apps/{app}/learn): straight into the learning
# stream, learned by the trainer exactly like a joined reward; a client's eventId given again
# while remembered is refused (a retried request is learned once).
LABEL = (
    _SAME_CONFIG
    + LUA_NOW
    + """
if tonumber(ARGV[5]) > 0 and not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[5]) then
  return {'exists'}
end
local id = redis.call('XADD', KEYS[2], '*', 'eventId', ARGV[2], 'context', ARGV[3],
                      'label', ARGV[4], 'source', 'label', 'receivedAt', now)
redis.call('HINCRBY', KEYS[3], 'labeled', 1)
return {'queued', id}
"""
)

# KEYS: config, lease
# ARGV: uid, trainer id, ttl ms     -> 1 if the caller holds the lease afterwards
ACQUIRE_LEASE = """
if redis.call('HGET', KEYS[1], 'uid') ~= ARGV[1] then return 0 end
local owner = redis.call('GET', KEYS[2])
if not owner then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return 1
end
if owner == ARGV[2] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return 1
end
return 0
"""

# Reading an app's learning stream, only while holding its lease. A trainer whose lease ran
# out (a take-over slower than the lease, a trainer paused) must not read after the new owner
# rewound the group (XGROUP SETID): the entries it read would be delivered to it, never to the
# new owner, and so never learned.
# KEYS: stream, lease   ARGV: trainer id (the consumer), group, count
# -> {'lease'} if the lease is another's, else XREADGROUP's answer (empty: nothing new)
READ = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {'lease'} end
local answer = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', ARGV[3],
                          'STREAMS', KEYS[1], '>')
if not answer then return {} end
return answer
"""

# KEYS: lease      ARGV: trainer id
RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# The snapshot hash holds the serving model ('serving', 'version', 'offset', 'eventsLearned',
# 'eventsRejected': what the API serves and reports) and the trainer's last checkpoint ('state',
# the learner's whole state, with the stream offset and counters it includes: 'stateOffset',
# 'stateLearned', 'stateRejected'). Every publication writes the first; a checkpoint (ARGV[9]
# given) also the second. A hash written before checkpoints existed has no 'stateOffset': its
# state is at 'offset'.
# KEYS: config, lease, snapshot
# ARGV: uid, trainer id, expected version, new version, offset, eventsLearned, eventsRejected,
#       serving bytes[, state bytes]
PUBLISH = (
    _SAME_APP
    + """
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return {'lease'} end
if redis.call('HGET', KEYS[3], 'version') ~= ARGV[3] then return {'version'} end
"""
    + LUA_NOW
    + """
redis.call('HSET', KEYS[3], 'version', ARGV[4], 'offset', ARGV[5], 'eventsLearned', ARGV[6],
           'eventsRejected', ARGV[7], 'updatedAt', now, 'serving', ARGV[8])
if ARGV[9] then
  redis.call('HSET', KEYS[3], 'state', ARGV[9], 'stateOffset', ARGV[5], 'stateLearned', ARGV[6],
             'stateRejected', ARGV[7])
end
return {'ok'}
"""
)


class Scripts:
    """The scripts registered on one client (redis-py reloads them after a Redis restart)."""

    def __init__(self, client: redis.Redis):
        self.create_app = client.register_script(CREATE_APP)
        self.decide = client.register_script(DECIDE)
        self.reward = client.register_script(REWARD)
        self.activate = client.register_script(ACTIVATE)
        self.expire = client.register_script(EXPIRE)
        self.label = client.register_script(LABEL)
        self.acquire_lease = client.register_script(ACQUIRE_LEASE)
        self.release_lease = client.register_script(RELEASE_LEASE)
        self.publish = client.register_script(PUBLISH)
        self.read = client.register_script(READ)
