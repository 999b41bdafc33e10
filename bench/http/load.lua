-- wrk script of bench/http: decide only, or decide then reward (BENCH_MODE=decide|reward), or
-- Personalizer's rank (BENCH_MODE=rank: the same context as contextFeatures, the app's actions
-- with two features each, the key in Ocp-Apim-Subscription-Key, as the SDKs send them), or its
-- multi-slot rank (BENCH_MODE=multislot: the same body with two slots, baselines ad0 and ad1).
-- Run by bench/http/wrk.py; environment: BENCH_APP, BENCH_KEY, BENCH_MODE, BENCH_ACTIONS, BENCH_RUN.
-- One wrk thread: every connection shares this state. In "reward" mode every other request
-- rewards a decision whose answer has arrived (its eventId was chosen by this script), reward 1
-- for the action ad<floor(f0 * actions)> (the rule to learn), else 1 in 10.
local app = os.getenv("BENCH_APP") or "bench"
local mode = os.getenv("BENCH_MODE") or "decide"
local n_actions = tonumber(os.getenv("BENCH_ACTIONS") or "10")
local run = os.getenv("BENCH_RUN") or tostring(os.time())
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if mode == "rank" or mode == "multislot" then
  wrk.headers["Ocp-Apim-Subscription-Key"] = os.getenv("BENCH_KEY") or "unused"
else
  wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_KEY") or "unused")
end
math.randomseed(os.time() + os.clock() * 1e6)

local sites = {"a", "b", "c", "d", "e"}
local counter = 0
local best = {}          -- eventId -> best action, while its decide is in flight
local ready = {}         -- rewards to send: {eventId, value}
local head, tail = 1, 0
local turn = 0
local decide_path = "/apps/" .. app .. "/decide"
local rank_path = "/personalizer/v1.0/rank"
local multislot_path = "/personalizer/v1.1-preview.1/multislot/rank"
local slots = '[{"id":"main","baselineAction":"ad0"},{"id":"side","baselineAction":"ad1"}]'
local offered = {}
for i = 0, n_actions - 1 do
  offered[#offered + 1] = string.format(
    '{"id":"ad%d","features":[{"topic":"t%d"},{"words":%d}]}', i, i % 8, 3 + i % 5)
end
offered = "[" .. table.concat(offered, ",") .. "]"
local reward_path = "/apps/" .. app .. "/reward"

request = function()
  turn = turn + 1
  if mode == "reward" and turn % 2 == 0 and head <= tail then
    local r = ready[head]
    ready[head] = nil
    head = head + 1
    return wrk.format(nil, reward_path, nil,
      string.format('{"eventId":"%s","reward":%s}', r[1], r[2]))
  end
  counter = counter + 1
  local f0 = math.random()
  if mode == "rank" then
    return wrk.format(nil, rank_path, nil, string.format(
      '{"eventId":"%s-%d","contextFeatures":[{"f0":%.5f,"f1":%.5f,"f2":%.5f,"f3":%.5f},' ..
      '{"site":"%s"}],"actions":%s}',
      run, counter, f0, math.random(), math.random(), math.random(), sites[math.random(5)],
      offered))
  end
  if mode == "multislot" then
    return wrk.format(nil, multislot_path, nil, string.format(
      '{"eventId":"%s-%d","contextFeatures":[{"f0":%.5f,"f1":%.5f,"f2":%.5f,"f3":%.5f},' ..
      '{"site":"%s"}],"actions":%s,"slots":%s}',
      run, counter, f0, math.random(), math.random(), math.random(), sites[math.random(5)],
      offered, slots))
  end
  local id = run .. "-" .. counter
  if mode == "reward" then best[id] = "ad" .. math.floor(f0 * n_actions) end
  return wrk.format(nil, decide_path, nil, string.format(
    '{"eventId":"%s","context":{"f0":%.5f,"f1":%.5f,"f2":%.5f,"f3":%.5f,"site":"%s"}}',
    id, f0, math.random(), math.random(), math.random(), sites[math.random(5)]))
end

response = function(status, headers, body)
  if mode ~= "reward" or status ~= 200 then return end
  local id = body:match('^{"eventId":"([^"]+)","action":"([^"]+)"')
  if not id then return end
  local action = body:match('"action":"([^"]+)"')
  local want = best[id]
  if want == nil then return end
  best[id] = nil
  local value = "0.0"
  if action == want or math.random() < 0.1 then value = "1.0" end
  tail = tail + 1
  ready[tail] = {id, value}
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"status_errors":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.status, e.connect, e.read, e.write,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
