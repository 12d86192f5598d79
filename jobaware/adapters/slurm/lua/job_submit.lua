-- jobaware job_submit.lua, rendered by `jobaware slurm plugins`: writes the verdict for each new job into
-- its @FIELD@, from the local verdict cache the jobaware Slurm adapter keeps. It never calls the network and
-- never rejects a job: a missing, stale or corrupt cache, or any error here, means no verdict (fail open); a broken
-- cache is said in slurmctld's log at info level, at most once a minute.
-- Install: beside slurm.conf, with `JobSubmitPlugins=lua` in slurm.conf.

--@CACHE_CODE@

-- slurmctld keeps this Lua state between calls (until the script changes): the last note about a broken cache
function JOBAWARE_SAID_WITHIN(now, seconds)
    if JOBAWARE_SAID and now >= JOBAWARE_SAID and now - JOBAWARE_SAID < seconds then return true end
    JOBAWARE_SAID = now
    return false
end

local FIELD = "@FIELD@"  -- "comment" (users see and may change it) or "admin_comment" (admins only)
local log_timing = slurm.log_@TIMING_LEVEL@
local NO_VAL = 4294967294
-- Slurm's own limit on the strings of a job request (comment, name, account, partition, tres_per_*: 1024 bytes,
-- _test_job_desc_fields() in src/slurmctld/job_mgr.c of Slurm 22.05). slurmctld refuses a longer one, but only
-- after this hook ran: here every string is still as long as the user sent it, so its length is checked before
-- anything reads it, and it is read by plain scans, never by a pattern that can backtrack.
local SLURM_MAX = 1024
-- the request's strings this hook reads, beside the verdict field
local STRINGS = {"user_name", "partition", "account", "tres_per_node", "tres_per_job", "tres_per_task"}

local function stated(value)
    if value == nil or value >= NO_VAL then return nil end
    return value
end

local function default_partition(part_list, cache)
    for name, part in pairs(part_list or {}) do
        if part.flag_default == 1 then return name end
    end
    return cache.default_partition
end

-- Shape buckets {time, nodes, cpus, memory per node, gpus}: each field from `desc` or, where `desc` leaves
-- it unset (a modify request), from `rec` (the TRES strings from `strings`, see strings_of()). Unset nodes and CPUs
-- count as 1, unset GPUs as 0; an unset time or memory is not stated.
local function shape_of(desc, rec, strings)
    local function get(name)
        local v = desc[name]
        if (v == nil or (type(v) == "number" and v >= NO_VAL)) and rec then v = rec[name] end
        return v
    end
    local nodes = stated(get("min_nodes")) or 1
    local cpus = stated(get("min_cpus")) or 1
    local mem = stated(get("min_mem_per_node"))
    local per_cpu = stated(get("min_mem_per_cpu"))
    if mem == nil and per_cpu ~= nil then mem = per_cpu * math.ceil(cpus / math.max(nodes, 1)) end
    local gpus = jobaware_gpus(strings.tres_per_node) or jobaware_gpus(strings.tres_per_job)
        or jobaware_gpus(strings.tres_per_task) or 0
    return {jobaware_bucket(stated(get("time_limit"))), jobaware_bucket(nodes), jobaware_bucket(cpus),
            jobaware_bucket(mem), jobaware_bucket(gpus)}
end

-- The last position up to `last` in `text` that is neither a space nor a bar ("[%s|]" of Lua's patterns), or 0: a
-- byte loop from the end, linear in what it passes
local function trimmed_end(text, last)
    while last > 0 do
        local b = string.byte(text, last)
        if b ~= 124 and b ~= 32 and (b < 9 or b > 13) then return last end  -- "|", " ", "\t" to "\r"
        last = last - 1
    end
    return 0
end

-- `old` without any earlier jobaware verdict (and the spaces and bars before it), then the new one: a user's own
-- text is kept whole. nil and why when the verdict cannot be merged: `old` is longer than Slurm allows (slurmctld
-- refuses the job right after this hook; cutting the user's text would make it take a job it refuses), or the
-- verdict has no room left beside the user's text (the verdict is left out, an earlier one removed).
local function merged(old, verdict)
    old = old or ""
    if #old > SLURM_MAX then return nil, "no verdict: " .. FIELD .. " over Slurm's " .. SLURM_MAX .. " bytes" end
    local at = string.find(old, "jobaware: ", 1, true)
    if at then old = string.sub(old, 1, trimmed_end(old, at - 1)) end
    if old == "" then return verdict end
    if #old + 3 + #verdict > SLURM_MAX then
        return old, "no verdict: no room beside the " .. #old .. " bytes of the user's " .. FIELD
    end
    return old .. " | " .. verdict
end

-- The request's STRINGS, each from `desc` or, where `desc` leaves it unset, from `rec`, read once (each read of a
-- job descriptor's field is a call into slurmctld); nil and why when one is longer than Slurm allows (slurmctld
-- refuses the request after this hook)
local function strings_of(desc, rec)
    local strings = {}
    for _, name in ipairs(STRINGS) do
        local v = desc[name]
        if v == nil and rec then v = rec[name] end
        if type(v) == "string" and #v > SLURM_MAX then
            return nil, "no verdict: " .. name .. " over Slurm's " .. SLURM_MAX .. " bytes"
        end
        strings[name] = v
    end
    return strings
end

-- a name the cache may hold a verdict for (verdicts.py's NAME, at most its 64 bytes), else nil; the first of a list
-- ("a,b") when `list`
local function cached_name(name, list)
    if type(name) ~= "string" then return nil end
    if list then
        local comma = string.find(name, ",", 1, true)
        if comma then name = string.sub(name, 1, comma - 1) end
    end
    if #name == 0 or #name > 64 or string.find(name, "[^%w._@+-]") then return nil end
    return name
end

local function verdict_for(desc, rec, part_list)
    local strings, too_long = strings_of(desc, rec)
    if strings == nil then return nil, too_long end
    local cache, why = jobaware_load(os.time())
    if cache == nil then return nil, "no verdict: cache " .. why end
    local user = strings.user_name
    if user == nil then return nil, "no verdict: unknown user" end
    user = cached_name(user)
    if user == nil then return nil, "no verdict: a user name the cache cannot hold" end
    local partition = strings.partition or default_partition(part_list, cache)
    -- a job may name several partitions ("a,b"): the first is the one its shape was cached under
    if partition == nil or partition == "" then return nil, "no verdict: unknown partition" end
    partition = cached_name(partition, true)
    if partition == nil then return nil, "no verdict: a partition the cache cannot hold" end
    local r, how = jobaware_lookup(cache, user, strings.account, partition, shape_of(desc, rec, strings))
    if r == nil and how then return nil, "no verdict: cache " .. how end
    if r == nil then return nil, "no verdict for " .. user .. " in " .. partition end
    return jobaware_comment(r, how), how
end

-- job_desc[FIELD] with the verdict merged into `from`[FIELD] (when it can be; see merged()), and how
local function write_verdict(job_desc, from, verdict, how)
    local text, why = merged(from[FIELD], verdict)
    if text ~= nil then job_desc[FIELD] = text end
    return why or how
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    local started = os.clock()
    local ok, verdict, how = pcall(verdict_for, job_desc, nil, part_list)
    if ok and verdict then
        ok, how = pcall(write_verdict, job_desc, job_desc, verdict, how)
    end
    if not ok then how = "error: " .. tostring(how or verdict) end
    log_timing("jobaware: job_submit %s %.3f ms", tostring(how or verdict), (os.clock() - started) * 1000)
    return slurm.SUCCESS
end

-- A change of the request's shape (time, nodes, CPUs, memory, GPUs, partition, account) gets the verdict
-- of the new shape; a request that sets the verdict field itself (the adapter's own update) is left alone.
local SHAPE_FIELDS = {"time_limit", "min_nodes", "min_cpus", "min_mem_per_node", "min_mem_per_cpu",
                      "tres_per_node", "tres_per_job", "tres_per_task", "partition", "account"}

local function reshaped(job_desc)
    if job_desc[FIELD] ~= nil then return false end
    for _, name in ipairs(SHAPE_FIELDS) do
        local v = job_desc[name]
        if v ~= nil and not (type(v) == "number" and v >= NO_VAL) then return true end
    end
    return false
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    local started = os.clock()
    local ok, changed = pcall(reshaped, job_desc)
    local verdict, how
    if not ok then
        how = "error: " .. tostring(changed)
    elseif not changed then
        how = "unchanged shape"
    else
        ok, verdict, how = pcall(verdict_for, job_desc, job_rec, part_list)
        if ok and verdict then
            ok, how = pcall(write_verdict, job_desc, job_rec, verdict, how)
        end
        if not ok then how = "error: " .. tostring(how or verdict) end
    end
    log_timing("jobaware: job_modify %s %.3f ms", tostring(how), (os.clock() - started) * 1000)
    return slurm.SUCCESS
end

return slurm.SUCCESS
