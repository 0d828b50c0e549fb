-- Unit tests of the gpuest job_submit plugin's modules (integrations/slurm), in the Lua 5.1
-- that Slurm 22.05 embeds, without Slurm: the JSON decoder, reading a job's
-- description, the request made of an answer, and how each way the CLI can end (an
-- answer, refused input, unavailable, a hang) maps to what the plugin does. The CLI
-- is a fake here (a shell script); the real one, a real server and a real slurmctld
-- are in slurm_job_submit_test.py.
--
-- Usage: lua5.1 gpuest_slurm_test.lua DEPLOY_SLURM_DIR

local dir = assert(arg[1], "usage: lua5.1 gpuest_slurm_test.lua DEPLOY_SLURM_DIR")
package.path = dir .. "/?.lua;" .. package.path
local json = require("gpuest_json")
local gpuest = require("gpuest_slurm")

local failures, checks = 0, 0
local function check(condition, message)
  checks = checks + 1
  if not condition then
    failures = failures + 1
    print("FAIL " .. message)
  end
end

local function config_with(overrides)
  local config = {}
  for key, value in pairs(gpuest.DEFAULTS) do config[key] = value end
  config.description_dirs = { "/shared/gpuest" }
  config.partitions = {
    gpu = { gpu = "a100-40gb", gres = "shard", gib_per_shard = 4, shards_per_gpu = 10 },
    mps = { gpu = "h100-80gb", gres = "mps" },
  }
  for key, value in pairs(overrides or {}) do config[key] = value end
  return config
end

local GIB = 2 ^ 30

local function recommendation(gib, capacity_gib, fits, extra)
  local rec = { memoryBytes = string.format("%d", gib * GIB), estimatorId = "allocsim",
                fit = { capacityBytes = string.format("%d", capacity_gib * GIB), fits = fits },
                cap = { needed = false } }
  for key, value in pairs(extra or {}) do rec[key] = value end
  return rec
end

-- gpuest_json ---------------------------------------------------------------------

do
  local value = json.decode('{"a": [1, -2.5e3, true, false, null], "s": "x\\"y\\u0041\\n", "o": {}}')
  check(value and value.a[1] == 1 and value.a[2] == -2500 and value.a[3] == true and value.a[4] == false,
        "json: numbers and literals")
  check(value and value.a[5] == json.null, "json: null is the null marker")
  check(value and value.s == 'x"yA\n', "json: escapes")
  for _, bad in ipairs({ "", "{", "[1,", '{"a" 1}', "nul", "1 2", '"\\q"', string.rep("[", 65) .. string.rep("]", 65) }) do
    local decoded, why = json.decode(bad)
    check(decoded == nil and type(why) == "string", "json: refuses " .. bad:sub(1, 20))
  end
  check(json.decode(nil) == nil, "json: refuses a non-string")
  -- protobuf's JSON mapping prints 64-bit integers as strings: they stay exact
  local response = json.decode('{"recommendation": {"memoryBytes": "15665856512", "fit": {"fits": true}}}')
  check(tonumber(response.recommendation.memoryBytes) == 15665856512, "json: uint64 as a string")
end

-- the job's description ----------------------------------------------------------

do
  local config = config_with({ max_inline_bytes = 100 })
  check(not gpuest.has_description(nil) and not gpuest.has_description("a run") and
        gpuest.has_description("  gpuest:x"), "has_description: only comments that start with gpuest:")
  local d = gpuest.find_description("gpuest: /shared/gpuest/a b.json ", config)
  check(d and d.path == "/shared/gpuest/a b.json", "a path, trimmed, spaces inside kept")
  d = gpuest.find_description('gpuest:{"layers": []}', config)
  check(d and d.inline == '{"layers": []}', "inline JSON")
  local cases = {
    { "gpuest:/etc/passwd", "not under" },
    { "gpuest:/shared/gpuest/../../etc/passwd", "not under" },
    { "gpuest:/shared/gpuestx/a.json", "not under" },
    { "gpuest:relative.json", "expected gpuest:" },
    { "gpuest:", "expected gpuest:" },
    { "gpuest:{" .. string.rep(" ", 200) .. "}", "over max_inline_bytes" },
    { "gpuest:" .. string.rep("x", 5000), "the comment is" },
  }
  for _, case in ipairs(cases) do
    local found, why = gpuest.find_description(case[1], config)
    check(not found and why and why:find(case[2], 1, true), "find_description refuses " .. case[1]:sub(1, 40)
          .. ": " .. tostring(why))
  end
  local no_paths = config_with({ description_dirs = {} })
  local found, why = gpuest.find_description("gpuest:/shared/gpuest/a.json", no_paths)
  check(not found and why:find("inline"), "paths are off without description_dirs")
  -- linear time on what a user may send: a megabyte of spaces
  local started = os.clock()
  gpuest.find_description("gpuest:" .. string.rep(" ", 1000000), config_with())
  gpuest.find_description("gpuest:{" .. string.rep(" ", 1000000) .. "}", config_with())
  check(os.clock() - started < 1, "a megabyte of spaces is read in well under a second")
end

-- the request made of an answer -------------------------------------------------

do
  local config = config_with()
  local shard = config.partitions.gpu
  local plan = gpuest.plan("gpu", shard, recommendation(14.6, 40, true), {})
  check(plan.tres_per_node == "gres:shard:4", "14.6 GiB at 4 GiB a shard: 4 shards, got " .. tostring(plan.tres_per_node))
  plan = gpuest.plan("gpu", shard, recommendation(0.1, 40, true), {})
  check(plan.tres_per_node == "gres:shard:1", "at least one shard")
  plan = gpuest.plan("gpu", shard, recommendation(14.6, 40, true), { tres_per_node = "gres:nic:1,gres/shard:7" })
  check(plan.tres_per_node == "gres:nic:1,gres:shard:7", "the job's larger shard request kept, other GRES too: "
        .. tostring(plan.tres_per_node))
  plan = gpuest.plan("gpu", shard, recommendation(14.6, 40, true), { tres_per_node = "gres:shard:1" })
  check(plan.tres_per_node == "gres:shard:4", "a smaller shard request raised")
  plan = gpuest.plan("gpu", { gpu = "x", gres = "shard", gib_per_shard = 4, shards_per_gpu = 2 },
                     recommendation(14.6, 40, true), { tres_per_node = "gres:shard:1" })
  check(plan.tres_per_node == "gres:gpu:1", "more shards than a GPU has: the whole GPU, " .. tostring(plan.tres_per_node))
  plan = gpuest.plan("gpu", { gpu = "x", gres = "shard", gib_per_shard = 8 }, recommendation(75, 79.6, true), {})
  check(plan.tres_per_node == "gres:gpu:1", "shards per GPU default to its memory over gib_per_shard (9 here)")
  plan = gpuest.plan("gpu", shard, recommendation(14.6, 40, true), { whole_gpus = true, tres_per_node = "gres:gpu:2" })
  check(plan.tres_per_node == nil and plan.summary:find("kept"), "a job asking for whole GPUs keeps its request")
  plan = gpuest.plan("gpu", shard, recommendation(51.7, 40, false), {})
  check(plan.reject and plan.reject:find("51.7 GiB", 1, true) and plan.reject:find("partition gpu", 1, true),
        "a job that fits no GPU is rejected, with the figures: " .. tostring(plan.reject))
  plan = gpuest.plan("gpu", shard, recommendation(41, 40, false, {}), {})
  local retry = recommendation(41, 40, false)
  retry.fit.allocatorRetry = "ALLOCATOR_RETRY_SAVES_IT"
  plan = gpuest.plan("gpu", shard, retry, {})
  check(plan.reject and plan.reject:find("retrying"), "the allocator's retry is named in the reason")
  local capped = recommendation(14.6, 40, true, { cap = { needed = true, perProcessMemoryFraction = 0.329 } })
  plan = gpuest.plan("gpu", shard, capped, {})
  check(plan.hint and plan.hint:find("0.329", 1, true), "a job that needs a cap is told how")

  plan = gpuest.plan("mps", config.partitions.mps, recommendation(15.5, 79.6, true), {})
  check(plan.tres_per_node == "gres:mps:20", "MPS share of memory, rounded up: " .. tostring(plan.tres_per_node))
  check(plan.env and plan.env.CUDA_MPS_PINNED_DEVICE_MEM_LIMIT == "0=15872M", "MPS pinned memory limit in MiB: "
        .. tostring(plan.env and plan.env.CUDA_MPS_PINNED_DEVICE_MEM_LIMIT))

  check(gpuest.asks_whole_gpus({ tres_per_job = "gres:gpu:1" }) and gpuest.asks_whole_gpus({ tres_per_node = "gres:gpu:a100:2" })
        and not gpuest.asks_whole_gpus({ tres_per_node = "gres:shard:2" }), "whole GPUs in any tres_per_ field")

  local parts = { gpu = { flag_default = 1 }, cpu = { flag_default = 0 } }
  check(gpuest.partition_for(nil, parts, config.partitions) == "gpu", "the default partition")
  check(gpuest.partition_for("cpu,mps", parts, config.partitions) == "mps", "the first mapped of several")
  check(gpuest.partition_for("cpu", parts, config.partitions) == nil, "an unmapped partition")
end

-- configuration ------------------------------------------------------------------

do
  local path = os.tmpname()
  local function config_text(text)
    local handle = assert(io.open(path, "w"))
    handle:write(text)
    handle:close()
    return gpuest.load_config(path)
  end
  local config = config_text('return { partitions = { gpu = { gpu = "a100-40gb", gres = "shard", gib_per_shard = 4 } } }')
  check(config and config.timeout_ms == 1000 and config.target == "127.0.0.1:50051", "defaults fill what is not set")
  local _, why = config_text('return { partitions = { gpu = { gpu = "a100-40gb", gres = "shard" } } }')
  check(why and why:find("gib_per_shard"), "a shard partition needs gib_per_shard")
  _, why = config_text('return { partitions = { gpu = { gpu = "a100-40gb", gres = "gpu" } } }')
  check(why and why:find("shard\" or \"mps"), "gres must be shard or mps")
  _, why = config_text('return { timeout_ms = "1s" }')
  check(why and why:find("timeout_ms"), "numbers are numbers")
  _, why = config_text('os.execute("true") return {}')
  check(why ~= nil, "the configuration cannot run os or io")
  os.remove(path)
end

-- the CLI's ways to end, with a fake CLI ---------------------------------------------

do
  local fake = os.tmpname()
  local function run_with(body, timeout_ms)
    local handle = assert(io.open(fake, "w"))
    handle:write("#!/bin/sh\n" .. body .. "\n")
    handle:close()
    os.execute("chmod +x " .. fake)
    local description = os.tmpname()
    handle = assert(io.open(description, "w"))
    handle:write("{}")
    handle:close()
    local config = config_with({ cli = fake, timeout_ms = timeout_ms or 1000 })
    local rec, result = gpuest.estimate(config, description, nil, "a100-40gb")
    os.remove(description)
    return rec, result
  end
  local answer = '{"recommendation": {"memoryBytes": "1073741824", "fit": {"capacityBytes": "42949672960", "fits": true}}}'
  local rec, elapsed = run_with("cat >/dev/null; echo '" .. answer .. "'")
  check(rec and tonumber(rec.memoryBytes) == GIB and type(elapsed) == "number", "an answer: the recommendation and the time")
  rec = run_with('case " $* " in *" --gpu a100-40gb estimate - "*) ;; *) exit 9;; esac; '
                 .. 'grep -q "^{}$" && echo \'' .. answer .. "'")
  check(rec ~= nil, "the CLI gets --gpu, `estimate -` and the description on stdin")
  local _, failure = run_with("echo 'gpuest: INVALID_ARGUMENT: model.layers: empty' >&2; exit 2")
  check(failure.kind == "bad_description" and failure.message:find("model.layers"), "exit 2: a bad description, with the message")
  _, failure = run_with("echo \"gpuest: INVALID_ARGUMENT: gpu: unknown GPU 'x'\" >&2; exit 2")
  check(failure.kind == "error" and failure.message:find("gpuest_slurm.conf"), "an unknown GPU model is the configuration's fault")
  _, failure = run_with("echo 'gpuest: UNAVAILABLE: no server' >&2; exit 3")
  check(failure.kind == "unavailable", "exit 3: unavailable")
  _, failure = run_with("echo 'not json'")
  check(failure.kind == "error" and failure.message:find("no recommendation"), "exit 0 without JSON: an error")
  _, failure = run_with("exit 9")
  check(failure.kind == "error", "another exit: an error")
  local started = os.time()
  _, failure = run_with("exec sleep 30", 200)
  check(failure.kind == "unavailable" and failure.message:find("killed"), "a CLI past its deadline is killed: "
        .. tostring(failure.message))
  check(os.time() - started <= 2, "and the plugin does not wait for it")
  -- One slow description is not an outage: the server answers its health check.
  local function serving_with(body)
    local handle = assert(io.open(fake, "w"))
    handle:write("#!/bin/sh\n" .. body .. "\n")
    handle:close()
    return gpuest.serving(config_with({ cli = fake, timeout_ms = 400 }))
  end
  check(serving_with('case " $* " in *" health "*) exit 0;; esac; exit 9') == true,
        "health SERVING: the server is up (this job's failure, no skipping)")
  check(serving_with('case " $* " in *" health "*) exit 3;; esac; exit 0') == false,
        "health UNAVAILABLE: an outage")
  started = os.time()
  check(serving_with("exec sleep 30") == false, "a health check that hangs: an outage")
  check(os.time() - started <= 2, "and it is not waited for")
  os.remove(fake)
end

print(string.format("%d checks, %d failed", checks, failures))
os.exit(failures == 0 and 0 or 1)
