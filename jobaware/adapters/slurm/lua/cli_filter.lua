-- jobaware cli_filter.lua, rendered by `jobaware slurm plugins`: advice for the user at sbatch/salloc time,
-- from the same local verdict cache as job_submit.lua. Advice only: it never changes or blocks a request,
-- and prints no advice when the cache is missing, stale or corrupt (it says so, at most once a minute), or when
-- anything here fails. It reads only the cache's header file (the cache itself is SlurmUser's) and the submitting
-- user's own file, which the file system lets that user alone read.
-- Install: beside slurm.conf, with `CliFilterPlugins=lua` in slurm.conf.

JOBAWARE_LOG = slurm.log_debug  -- the cache's own notes stay out of the user's terminal
--@CACHE_CODE@

-- The process's "Uid:" line (real, effective, saved, filesystem), read rather than asked of a command (a fork costs
-- milliseconds)
local function uids()
    local f = io.open("/proc/self/status", "rb")
    if f == nil then return nil end
    local real, effective = string.match(f:read("*a") or "", "\nUid:%s+(%d+)%s+(%d+)")
    f:close()
    return real, effective
end

-- sbatch loads this file afresh each time: the time of the last note about a broken cache (said at info level,
-- on the user's terminal, at most once a minute) is kept in a small file of the user's own, replaced by rename.
-- Not by root (nor when the uid cannot be read): root may run sbatch with another user's $HOME or
-- $XDG_RUNTIME_DIR (`su` without `-`), where a link that user put at the file's name would have root write through
-- it, and Lua 5.1 cannot open a file without following links; root then hears the note every time.
local function said_file()
    local real, effective = uids()
    if real == nil or real == "0" or effective == "0" then return nil end
    local dir = os.getenv("XDG_RUNTIME_DIR") or os.getenv("HOME")
    return dir and dir ~= "" and (dir .. "/.jobaware-cli-filter-said") or nil
end

function JOBAWARE_SAID_WITHIN(now, seconds)
    local path = said_file()
    if path == nil then return false end
    local f = io.open(path, "rb")
    if f then
        local last = f:read("*n")
        f:close()
        if last and now >= last and now - last < seconds then return true end
    end
    os.remove(path .. ".tmp")  -- a link left at the temporary name is removed, not written through
    f = io.open(path .. ".tmp", "wb")
    if f then
        f:write(string.format("%d\n", now))
        f:close()
        os.rename(path .. ".tmp", path)
    end
    return false
end

local function number(text)
    return tonumber(string.match(text or "", "^%d+"))
end

-- "500", "500M", "2G", "1T", "4096K" -> MiB (what "^(%d+%.?%d*)([KkMmGgTt]?)" reads, by anchored single runs)
local function mebibytes(text)
    local _, last = string.find(text or "", "^%d+")
    if last == nil then return nil end
    if string.sub(text, last + 1, last + 1) == "." then _, last = string.find(text, "^%d*", last + 2) end
    local scale = {[""] = 1, K = 1 / 1024, M = 1, G = 1024, T = 1024 * 1024}
    return tonumber(string.sub(text, 1, last)) * (scale[string.upper(string.sub(text, last + 1, last + 1))] or 1)
end

-- Whose verdicts: $USER or $LOGNAME, else "#UID" from /proc (the adapter links PATH.users/#UID.tsv to the user's
-- file); never a command (a fork costs milliseconds)
local function user_name()
    local name = os.getenv("USER") or os.getenv("LOGNAME")
    if name and name ~= "" then return name end
    local uid = uids()
    return uid and "#" .. uid
end

-- the same shape buckets job_submit.lua computes from the job descriptor slurmctld receives, and the values
-- the job asks for (what the advice may name)
local function shape_of(options)
    local minutes = options["time"] and slurm.time_str2mins(options["time"])
    if minutes ~= nil and minutes <= 0 then minutes = nil end
    local nodes = number(options["nodes"]) or 1
    local ntasks = math.max(number(options["ntasks"]) or 1, 1)
    local per_node = number(options["ntasks-per-node"])
    if per_node and per_node > 0 then ntasks = math.max(ntasks, per_node * nodes) end
    local cpus = ntasks * math.max(number(options["cpus-per-task"]) or 1, 1)
    local mem = mebibytes(options["mem"])
    local per_cpu = mebibytes(options["mem-per-cpu"])
    if mem == nil and per_cpu ~= nil then mem = per_cpu * math.ceil(cpus / math.max(nodes, 1)) end
    local gpus = jobaware_gpus(options["gres"]) or number(options["gpus-per-node"]) or number(options["gpus"]) or 0
    return {jobaware_bucket(minutes), jobaware_bucket(nodes), jobaware_bucket(cpus), jobaware_bucket(mem),
            jobaware_bucket(gpus)}, {time_minutes = minutes, nodes = nodes, cpus = cpus, mem_mib = mem, gpus = gpus}
end

-- The options the advice reads; a value longer than Slurm's 1024 bytes for a request's strings (slurmctld refuses
-- the job: _test_job_desc_fields() in src/slurmctld/job_mgr.c) means no advice, before any pattern reads it
local OPTIONS = {"time", "nodes", "ntasks", "ntasks-per-node", "cpus-per-task", "mem", "mem-per-cpu", "gres",
                 "gpus-per-node", "gpus", "partition", "account"}
local SLURM_MAX = 1024

-- The cached advice for jobs like this one (the adapter decided whether there is any), with what the job asks
local function advise(options)
    local kind = options["type"]
    if kind == "srun" and os.getenv("SLURM_JOB_ID") then return end  -- a step inside a job: no advice
    if kind ~= "sbatch" and kind ~= "salloc" and kind ~= "srun" then return end
    -- the cache's header file: the cache itself is SlurmUser's alone (see verdicts.py)
    local cache = jobaware_load(os.time(), JOBAWARE_CACHE_PATH .. ".users/#header.tsv")
    if cache == nil then return end
    for _, name in ipairs(OPTIONS) do
        local v = options[name]
        if type(v) == "string" and #v > SLURM_MAX then return end
    end
    local user = user_name()
    local partition = options["partition"] or cache.default_partition
    local comma = string.find(partition, ",", 1, true)  -- the first of a list
    if comma then partition = string.sub(partition, 1, comma - 1) end
    if user == nil or partition == "" then return end
    local shape, asked = shape_of(options)
    local r = jobaware_lookup(cache, user, options["account"], partition, shape)
    if r and r.advice ~= "" then io.stderr:write("jobaware: " .. jobaware_fill(r.advice, asked) .. "\n") end
end

function slurm_cli_setup_defaults(options, early_pass)
    return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
    pcall(advise, options)
    return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
    return slurm.SUCCESS
end

return slurm.SUCCESS
