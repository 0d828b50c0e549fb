-- gpuest_slurm.lua: what Slurm's job_submit plugin (job_submit.lua) does with a job
-- that carries a gpuest description: ask gpuest for the job's GPU memory on the
-- partition's GPU model and turn the answer into what Slurm schedules or enforces by
-- (a gres/shard count, or a gres/mps share with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), or
-- reject the job when it fits no GPU of the partition.
--
-- job_submit.lua loads this once per Lua state and calls submit() for every
-- submission, under slurmctld's locks. Anything in doubt (no answer in time, a server
-- that is down, a description gpuest refuses) leaves the job as it was submitted and
-- says why, in slurmctld's log and to the submitter. README.md here is the manual.

local json = require("gpuest_json")

local M = {}

local GIB = 2 ^ 30
local MIB = 2 ^ 20
local PREFIX = "gpuest:"
local SLURM_COMMENT_MAX = 1024
local TIMEOUT = "/usr/bin/timeout"
local BASH = "/bin/bash"

M.DEFAULTS = {
  cli = "/usr/local/bin/gpuest",
  target = "127.0.0.1:50051",
  cli_flags = {},
  timeout_ms = 1000,
  skip_after_failure_s = 30,
  max_inline_bytes = 1048576,
  max_file_bytes = 16777216,
  description_dirs = {},
  partitions = {},
}

-- Per Lua state (slurmctld keeps one while job_submit.lua is unchanged): until when
-- each server is skipped after it failed to answer, and why.
local skipped_until, last_failure = {}, {}

---------------------------------------------------------------------------
-- Configuration (gpuest_slurm.conf, beside job_submit.lua)
---------------------------------------------------------------------------

-- Read on every submission that carries a description, so an edit takes effect
-- without a restart. The file is data: it runs with no access to os or io.
function M.load_config(path)
  local chunk, err = loadfile(path)
  if not chunk then return nil, err end
  setfenv(chunk, {})
  local ok, config = pcall(chunk)
  if not ok then return nil, path .. ": " .. tostring(config) end
  if type(config) ~= "table" then return nil, path .. ": must return a table" end
  for key, value in pairs(M.DEFAULTS) do
    if config[key] == nil then config[key] = value end
  end
  for _, key in ipairs({ "timeout_ms", "skip_after_failure_s", "max_inline_bytes", "max_file_bytes" }) do
    if type(config[key]) ~= "number" or config[key] < 0 then return nil, path .. ": " .. key .. " must be a number >= 0" end
  end
  for _, key in ipairs({ "cli_flags", "description_dirs", "partitions" }) do
    if type(config[key]) ~= "table" then return nil, path .. ": " .. key .. " must be a table" end
  end
  for name, part in pairs(config.partitions) do
    local where = path .. ": partitions." .. tostring(name)
    if type(part) ~= "table" or type(part.gpu) ~= "string" then
      return nil, where .. ": needs gpu = \"MODEL\" (a profile of gpuest's gpu_profiles.json)"
    end
    if part.gres == "shard" then
      if not (tonumber(part.gib_per_shard) and part.gib_per_shard > 0) then
        return nil, where .. ": gres = \"shard\" needs gib_per_shard > 0"
      end
    elseif part.gres ~= "mps" then
      return nil, where .. ": gres must be \"shard\" or \"mps\""
    end
  end
  return config
end

---------------------------------------------------------------------------
-- The job's description
---------------------------------------------------------------------------

function M.has_description(comment)
  return type(comment) == "string" and comment:find("^%s*" .. PREFIX) ~= nil
end

-- Linear on any input: a pattern such as "^%s*(.-)%s*$" takes quadratic time on a long
-- run of spaces, and this runs under slurmctld's locks on text the user chose.
local function trim(text)
  local first = text:find("%S")
  if not first then return "" end
  local last = #text + 1 - text:reverse():find("%S")
  return text:sub(first, last)
end

local function under_allowed_dir(path, dirs)
  for _, dir in ipairs(dirs) do
    if dir:sub(-1) ~= "/" then dir = dir .. "/" end
    if path:sub(1, #dir) == dir then return true end
  end
  return false
end

-- "gpuest:/abs/path.json" or "gpuest:{...}" -> {path = ...} or {inline = ...};
-- nil, reason when the comment names a description the plugin will not use.
function M.find_description(comment, config)
  if not M.has_description(comment) then return nil, "no description" end
  if #comment > config.max_inline_bytes + 1024 then
    return nil, string.format("the comment is %d bytes, over max_inline_bytes (%d)",
                              #comment, config.max_inline_bytes)
  end
  local _, prefix_end = comment:find(PREFIX, 1, true)
  local value = trim(comment:sub(prefix_end + 1))
  if value:sub(1, 1) == "{" then
    if #value > config.max_inline_bytes then
      return nil, string.format("the inline description is %d bytes, over max_inline_bytes (%d)",
                                #value, config.max_inline_bytes)
    end
    return { inline = value }
  end
  if value:sub(1, 1) ~= "/" then
    return nil, "expected gpuest:/absolute/path.json or gpuest:{...inline JSON...}"
  end
  if #config.description_dirs == 0 then
    return nil, "descriptions by path are off here (description_dirs is empty): give the JSON inline"
  end
  if value:find("/%.%.?/") or value:find("/%.%.?$") or not under_allowed_dir(value, config.description_dirs) then
    return nil, "the path is not under " .. table.concat(config.description_dirs, " or ")
  end
  return { path = value }
end

---------------------------------------------------------------------------
-- Asking gpuest
---------------------------------------------------------------------------

local function quote(text)
  return "'" .. (tostring(text):gsub("'", "'\\''")) .. "'"
end

local function first_line(text)
  local line = ""
  for candidate in (text or ""):gmatch("[^\n]+") do
    if candidate:find("%S") then line = candidate; break end
  end
  line = line:gsub("^gpuest%-job%-submit: line %d+: ", ""):gsub("%c", " ")
  return #line > 300 and line:sub(1, 297) .. "..." or line
end

local function read_file(path)
  local handle = io.open(path, "r")
  if not handle then return "" end
  local text = handle:read("*a") or ""
  handle:close()
  return text
end

-- Arguments: FILE UID MAX_BYTES CLI ARGS... It opens the description once and checks
-- the file it opened, not the name (which a user could swap for a link meanwhile): a
-- regular file, no larger than MAX_BYTES, and, for a path the job named, owned by the
-- job's user, so the controller never passes on a file that user could not have
-- given. The CLI reads that same descriptor. It prints "asking" before the call (a
-- kill before it is the file's fault, not the server's) and the call's wall time
-- after it, from bash's clock, so measuring costs no extra process.
local RUN_SCRIPT = [[
f=$1 uid=$2 max_bytes=$3; shift 3
[ -f "$f" ] || { echo "$f: not a regular file" >&2; exit 66; }
exec 3<"$f" || exit 66
[ -f /dev/fd/3 ] || { echo "$f: not a regular file" >&2; exit 66; }
owner_size=$(stat -Lc '%u %s' /dev/fd/3) || exit 66
if [ -n "$uid" ] && [ "${owner_size% *}" != "$uid" ]; then
  echo "$f: not owned by the job's user (uid $uid)" >&2; exit 66
fi
if [ "${owner_size#* }" -gt "$max_bytes" ]; then
  echo "$f: ${owner_size#* } bytes, over max_file_bytes ($max_bytes)" >&2; exit 66
fi
echo asking
t0=${EPOCHREALTIME//[.,]/}
"$@" - <&3
rc=$?
t1=${EPOCHREALTIME//[.,]/}
printf '\nelapsed-us=%d\n' $(( t1 - t0 ))
exit $rc
]]

-- The estimate of the description in `file` on `gpu`: the response's recommendation
-- and the call's wall time in microseconds; or nil and {kind, message}, where kind is
-- "unavailable" (down, slow, killed at the deadline), "bad_description" or "error".
function M.estimate(config, file, owner_uid, gpu)
  local args = { config.cli, "--target", config.target, "--timeout", config.timeout_ms .. "ms",
                 "--json", "--gpu", gpu }
  for _, flag in ipairs(config.cli_flags) do args[#args + 1] = flag end
  args[#args + 1] = "estimate"
  -- The CLI keeps its own deadline; timeout(1) kills whatever outlives it (a file
  -- that blocks on open, a CLI that hangs) half a second later.
  local hard_limit = string.format("%.3f", config.timeout_ms / 1000 + 0.5)
  local words = { TIMEOUT, "-k", "1", hard_limit, BASH, "-c", quote(RUN_SCRIPT), "gpuest-job-submit",
                  quote(file), quote(owner_uid or ""), quote(config.max_file_bytes) }
  for _, arg in ipairs(args) do words[#words + 1] = quote(arg) end
  local errors_file = os.tmpname()
  local command = table.concat(words, " ") .. " 2>" .. quote(errors_file) .. '; echo "exit=$?"'

  local pipe = io.popen(command, "r")
  local out = pipe and pipe:read("*a") or ""
  if pipe then pipe:close() end
  local stderr = read_file(errors_file)
  os.remove(errors_file)

  local status = tonumber(out:match("exit=(%d+)%s*$"))
  local body = out:gsub("exit=%d+%s*$", "")
  local elapsed_us = tonumber(body:match("elapsed%-us=(%d+)%s*$"))
  body = body:gsub("elapsed%-us=%d+%s*$", "")
  local asked
  body, asked = body:gsub("^asking\n", "")

  if status == 0 then
    local response, why = json.decode(body)
    local rec = type(response) == "table" and response.recommendation
    if type(rec) ~= "table" or not tonumber(rec.memoryBytes) or type(rec.fit) ~= "table"
        or not tonumber(rec.fit.capacityBytes) then
      return nil, { kind = "error", message = "gpuest's answer has no recommendation with a fit: " .. (why or "fields missing") }
    end
    return rec, elapsed_us
  elseif status == 2 and stderr:find("INVALID_ARGUMENT: gpu:", 1, true) then
    return nil, { kind = "error", message = "gpuest_slurm.conf names a GPU gpuest does not know: " .. first_line(stderr) }
  elseif status == 2 or status == 66 then
    return nil, { kind = "bad_description", message = first_line(stderr) }
  elseif status == 3 then
    return nil, { kind = "unavailable", message = first_line(stderr) }
  elseif (status == 124 or status == 137) and asked == 0 then
    return nil, { kind = "bad_description", message = string.format(
      "the description file did not open in %s s (a FIFO?)", hard_limit) }
  elseif status == 124 or status == 137 then
    return nil, { kind = "unavailable", message = string.format("no answer in %s s: killed", hard_limit) }
  elseif status == 126 or status == 127 then
    return nil, { kind = "error", message = "cannot run " .. config.cli .. ": " .. first_line(stderr) }
  end
  return nil, { kind = "error", message = string.format("%s exited %s: %s", config.cli,
                                                         tostring(status), first_line(stderr)) }
end

-- Whether the server answers its health check at once (within half the plugin's
-- deadline): asked only after an estimate came back "unavailable", so that one job's
-- description that the server could not answer in time (a huge file, a slow trace)
-- is told from an outage. Only an outage skips gpuest for the jobs that follow.
function M.serving(config)
  local budget_ms = math.max(100, math.floor(config.timeout_ms / 2))
  local words = { TIMEOUT, "-k", "1", string.format("%.3f", budget_ms / 1000 + 0.2),
                  quote(config.cli), "--target", quote(config.target), "--timeout",
                  budget_ms .. "ms", "health" }
  local ok, _, code = os.execute(table.concat(words, " ") .. " >/dev/null 2>&1")
  return ok == true or ok == 0 or code == 0
end

---------------------------------------------------------------------------
-- From the answer to Slurm's request
---------------------------------------------------------------------------

local COUNT_UNITS = { [""] = 1, k = 1024, m = MIB, g = GIB }

-- "gres:gpu:a100:2" -> "gpu", 2; "gres:shard" -> "shard", 1.
local function gres_name_and_count(entry)
  local body = entry:gsub("^gres[:/]", "")
  local name = body:match("^([^:]+)")
  local digits, unit = body:match(":(%d+)(%a?)$")
  local count = 1
  if digits and COUNT_UNITS[unit:lower()] then count = tonumber(digits) * COUNT_UNITS[unit:lower()] end
  return name, count
end

-- tres_per_node with GRES `name` at least `count` (a larger request of the job's own
-- is kept), `drop` removed, every other entry kept; and the count it asks for.
function M.with_gres(tres_per_node, name, count, drop)
  local entries, found = {}, false
  for entry in (tres_per_node or ""):gmatch("[^,]+") do
    local entry_name, entry_count = gres_name_and_count(entry)
    if entry_name == name then
      found, count = true, math.max(entry_count, count)
      entry = "gres:" .. name .. ":" .. count
    end
    if entry_name ~= drop then entries[#entries + 1] = entry end
  end
  if not found then entries[#entries + 1] = "gres:" .. name .. ":" .. count end
  return table.concat(entries, ","), count
end

function M.asks_whole_gpus(job_desc)
  for _, field in ipairs({ "tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket" }) do
    for entry in (job_desc[field] or ""):gmatch("[^,]+") do
      if gres_name_and_count(entry) == "gpu" then return true end
    end
  end
  return false
end

local function gib(bytes) return string.format("%.1f GiB", bytes / GIB) end

-- What to do with a job whose recommendation is `rec` on partition `name` (config
-- `part`): {reject = reason} or {tres_per_node, env, summary, hint}.
function M.plan(name, part, rec, job)
  local need, capacity = tonumber(rec.memoryBytes), tonumber(rec.fit.capacityBytes)
  local head = string.format("%s on %s (partition %s, %s)", gib(need), part.gpu, name,
                             tostring(rec.estimatorId))
  if not rec.fit.fits then
    local retry = rec.fit.allocatorRetry == "ALLOCATOR_RETRY_SAVES_IT"
        and " (PyTorch's allocator might squeeze it in by emptying its cache and retrying, slower and with no margin)"
        or ""
    return { reject = string.format(
      "gpuest: this job needs %s of GPU memory at its peak, more than the %s of partition %s's "
      .. "GPUs (%s)%s. Lower its batch size, or submit it to a partition with larger GPUs "
      .. "(or without the gpuest description, to run it anyway).",
      gib(need), gib(capacity), name, part.gpu, retry) }
  end
  if job.whole_gpus then
    return { summary = head .. ": fits; the job asks for whole GPUs, its request is kept" }
  end
  local hint
  if type(rec.cap) == "table" and rec.cap.needed and tonumber(rec.cap.perProcessMemoryFraction) then
    hint = string.format("gpuest: uncapped, this job can take more than %s in its first steps "
      .. "(cuDNN's benchmark search); keep it within its share with "
      .. "torch.cuda.set_per_process_memory_fraction(%.3f) or torch.backends.cudnn.benchmark = False",
      gib(need), rec.cap.perProcessMemoryFraction)
  end
  if part.gres == "shard" then
    local shard_bytes = part.gib_per_shard * GIB
    local shards = math.max(1, math.ceil(need / shard_bytes))
    local per_gpu = tonumber(part.shards_per_gpu) or math.floor(capacity / shard_bytes)
    if shards > per_gpu then
      return { tres_per_node = M.with_gres(job.tres_per_node, "gpu", 1, "shard"),
               summary = string.format("%s: %d shards of %s GiB, more than a GPU's %d: gres/gpu:1",
                                       head, shards, part.gib_per_shard, per_gpu) }
    end
    local tres, asked = M.with_gres(job.tres_per_node, "shard", shards)
    return { tres_per_node = tres, hint = hint,
             summary = string.format("%s: gres/shard:%d of %s GiB%s", head, asked, part.gib_per_shard,
                                     asked > shards and string.format(" (the job's own; it needs %d)", shards) or "") }
  end
  -- MPS: the share keeps the scheduler from packing more memory on a GPU than it has;
  -- the pinned limit is what CUDA enforces (device 0: Slurm shows an MPS job one GPU).
  local share = math.max(1, math.ceil(need / capacity * (tonumber(part.mps_per_gpu) or 100)))
  local limit = "0=" .. math.ceil(need / MIB) .. "M"
  local tres, asked = M.with_gres(job.tres_per_node, "mps", share)
  return { tres_per_node = tres, env = { CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = limit },
           summary = string.format("%s: gres/mps:%d, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s", head, asked, limit) }
end

-- The first of the job's partitions (or the default one) that the config maps.
function M.partition_for(job_partition, part_list, partitions)
  if job_partition then
    for name in job_partition:gmatch("[^,]+") do
      if partitions[name] then return name end
    end
    return nil
  end
  for name, part in pairs(part_list or {}) do
    if part.flag_default == 1 then return partitions[name] and name or nil end
  end
  return nil
end

---------------------------------------------------------------------------
-- One submission
---------------------------------------------------------------------------

-- Sizes one job: true and what became of it, or false to reject it.
local function size_job(job_desc, part_list, config, log, who)
  local function unchanged(why)
    log.info(string.format("gpuest: %s left unchanged: %s", who, why))
    log.user("gpuest: the job was not sized by gpuest (" .. why .. "); it is submitted as it was")
    return true, "not used: " .. why
  end

  local description, why = M.find_description(job_desc.comment, config)
  if not description then return unchanged("bad description: " .. why) end
  local partition = M.partition_for(job_desc.partition, part_list, config.partitions)
  if not partition then
    local note = string.format("partition %s has no GPU model in gpuest's config",
                               tostring(job_desc.partition or "(default)"))
    log.info(string.format("gpuest: %s: %s; unchanged", who, note))
    return true, "not used: " .. note
  end
  local part = config.partitions[partition]

  local server = config.cli .. " " .. config.target
  if (skipped_until[server] or 0) > os.time() then
    return unchanged(string.format("gpuest at %s is skipped until %s after it failed: %s", config.target,
                                   os.date("%H:%M:%S", skipped_until[server]), last_failure[server]))
  end

  local rec, result
  if description.inline then
    local file = os.tmpname()
    local handle = io.open(file, "w")
    if not handle then os.remove(file); return unchanged("cannot write a temporary file") end
    handle:write(description.inline)
    handle:close()
    local ok
    ok, rec, result = pcall(M.estimate, config, file, nil, part.gpu)
    os.remove(file)
    if not ok then error(rec, 0) end
  else
    rec, result = M.estimate(config, description.path, string.format("%d", job_desc.user_id), part.gpu)
  end

  if not rec then
    if result.kind == "unavailable" and M.serving(config) then
      return unchanged(string.format("gpuest at %s is up but did not answer this job in time: %s",
                                     config.target, result.message))
    elseif result.kind == "unavailable" then
      skipped_until[server] = os.time() + config.skip_after_failure_s
      last_failure[server] = result.message
      return unchanged(string.format("gpuest unavailable at %s: %s (skipped for the next %d s)",
                                     config.target, result.message, config.skip_after_failure_s))
    elseif result.kind == "bad_description" then
      return unchanged("bad description: " .. result.message)
    end
    return unchanged(result.message)
  end
  skipped_until[server], last_failure[server] = nil, nil

  local whole_gpus = M.asks_whole_gpus(job_desc)
  local plan = M.plan(partition, part, rec, { tres_per_node = job_desc.tres_per_node, whole_gpus = whole_gpus })
  local took = result and string.format(" [gpuest %.1f ms]", result / 1000) or ""
  if plan.reject then
    log.info(string.format("gpuest: %s rejected: %s%s", who, (plan.reject:gsub("^gpuest: ", "")), took))
    log.user(plan.reject)
    return false
  end
  if plan.tres_per_node then job_desc.tres_per_node = plan.tres_per_node end
  local env_note = ""
  if plan.env then
    if job_desc.script then
      for name, value in pairs(plan.env) do job_desc.environment[name] = value end
    else
      -- srun and salloc jobs carry no environment for the controller to set.
      for name, value in pairs(plan.env) do env_note = env_note .. " export " .. name .. "=" .. value .. ";" end
      env_note = " (not a batch job: in it," .. env_note .. ")"
    end
  end
  local record = "gpuest: " .. plan.summary
  job_desc.admin_comment = job_desc.admin_comment and (job_desc.admin_comment .. "; " .. record) or record
  log.info(string.format("gpuest: %s: %s%s%s", who, plan.summary, env_note, took))
  log.user(record .. env_note)
  if plan.hint then log.user(plan.hint) end
  return true, plan.summary
end

-- Returns false to reject the job, true otherwise. `log` has info(text) (slurmctld's
-- log) and user(text) (printed by sbatch/srun to the submitter).
function M.submit(job_desc, part_list, config, log)
  local comment = job_desc.comment
  if not M.has_description(comment) then return true end
  local name = tostring(job_desc.name):gsub("%c", " "):sub(1, 100)
  local who = string.format("job '%s' of uid %s", name, tostring(job_desc.user_id))
  local accepted, outcome = size_job(job_desc, part_list, config, log, who)
  -- Slurm 22.05 refuses a comment over 1024 bytes, and checks only after this plugin
  -- ran: an inline description gives way to a record of what became of it, so that a
  -- long one neither blocks the job nor lands in the accounting database.
  if accepted and (comment:find("^%s*gpuest:%s*{") or #comment > SLURM_COMMENT_MAX) then
    job_desc.comment = string.format("gpuest: inline description of %d bytes; %s",
                                     #comment, outcome):sub(1, SLURM_COMMENT_MAX)
  end
  return accepted
end

return M
