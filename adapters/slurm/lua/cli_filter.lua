-- jobaware cli_filter.lua, rendered by `jobaware slurm plugins`: advice for the user at sbatch/salloc time,
-- from the same local verdict cache as job_submit.lua. Advice only: it never changes or blocks a request,
-- and prints nothing when the cache is missing, stale or corrupt, or when anything here fails.
-- Install: beside slurm.conf, with `CliFilterPlugins=lua` in slurm.conf.

JOBAWARE_LOG = slurm.log_debug  -- the cache's own notes stay out of the user's terminal
--@CACHE_CODE@

local function number(text)
    return tonumber(string.match(text or "", "^%d+"))
end

-- "500", "500M", "2G", "1T", "4096K" -> MiB
local function mebibytes(text)
    local n, unit = string.match(text or "", "^(%d+%.?%d*)([KkMmGgTt]?)")
    if n == nil then return nil end
    local scale = {[""] = 1, K = 1 / 1024, M = 1, G = 1024, T = 1024 * 1024}
    return tonumber(n) * scale[string.upper(unit)]
end

local function user_name()
    local name = os.getenv("USER") or os.getenv("LOGNAME")
    if name then return name end
    local pipe = io.popen("id -un 2>/dev/null")
    if pipe == nil then return nil end
    name = pipe:read("*l")
    pipe:close()
    return name
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

-- The cached advice for jobs like this one (the adapter decided whether there is any), with what the job asks
local function advise(options)
    local kind = options["type"]
    if kind == "srun" and os.getenv("SLURM_JOB_ID") then return end  -- a step inside a job: no advice
    if kind ~= "sbatch" and kind ~= "salloc" and kind ~= "srun" then return end
    local cache = jobaware_load(os.time())
    if cache == nil then return end
    local user = user_name()
    local partition = string.match(options["partition"] or cache.default_partition, "^[^,]+")
    if user == nil or partition == nil then return end
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
