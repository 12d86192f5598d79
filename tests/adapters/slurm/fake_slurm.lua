-- Runs a rendered plugin under lua5.1 with a stand-in for the `slurm` table slurmctld and sbatch provide.
-- usage: lua5.1 fake_slurm.lua PLUGIN.lua COMMANDS_FILE
-- Each command line is tab-separated: "lookup USER ACCOUNT PARTITION T N C M G" ("-" = not stated),
-- "submit FIELD=VALUE ...", "modify FIELD=VALUE ... || RECFIELD=VALUE ...", "advise OPTION=VALUE ...",
-- "fill TEXT" (jobaware_fill with time_minutes=60, cpus=4), "gpus TRES" (jobaware_gpus); "timed COMMAND ..." runs
-- the command, then prints "cpu SECONDS" (Lua's os.clock(): this process's CPU time, whatever the machine's load).
-- Prints one answer line per command; log lines start with "info: " (slurm.log_info) or "log: " (the others).
-- A value is a number where it reads as one, but for the strings Slurm hands over as strings.
slurm = {SUCCESS = 0, ERROR = -1}
local function log(fmt, ...) print("log: " .. string.format(fmt, ...)) end
slurm.log_debug, slurm.log_error = log, log
function slurm.log_info(fmt, ...) print("info: " .. string.format(fmt, ...)) end
function slurm.time_str2mins(text)  -- "MM", "HH:MM:SS" or "D-HH:MM:SS", enough for the tests
    local d, h, m, s = string.match(text, "^(%d+)-(%d+):(%d+):(%d+)$")
    if d then return d * 1440 + h * 60 + m + (tonumber(s) > 0 and 1 or 0) end
    h, m, s = string.match(text, "^(%d+):(%d+):(%d+)$")
    if h then return h * 60 + m + (tonumber(s) > 0 and 1 or 0) end
    return tonumber(text) or -1
end
dofile(arg[1])

local function fields(line)
    local out = {}
    for item in string.gmatch(line, "[^\t]+") do out[#out + 1] = item end
    return out
end

local STRINGS = {comment = true, admin_comment = true, name = true, account = true, partition = true,
                 user_name = true, tres_per_node = true, tres_per_job = true, tres_per_task = true}

local function record(items, from, to, strings)
    local t = {}
    for i = from, to do
        local k, v = string.match(items[i], "^([^=]+)=(.*)$")
        t[k] = (strings or STRINGS[k]) and v or tonumber(v) or v
    end
    return t
end

local function run(f)
    if f[1] == "lookup" then
        local cache, why = jobaware_load(os.time())
        if cache == nil then
            print("none " .. why)
        else
            local q = {}
            for i = 1, 5 do q[i] = tonumber(f[i + 4]) end
            local account = f[3] ~= "-" and f[3] or nil
            local r, how = jobaware_lookup(cache, f[2], account, f[4], q)
            if r == nil then print("none") else
                print(table.concat({how, r.user, r.account, r.partition, table.concat(r.shape, ",")}, " "))
            end
        end
    elseif f[1] == "submit" then
        local desc = record(f, 2, #f)
        print("rc=" .. slurm_job_submit(desc, {debug = {flag_default = 1}}, 0) .. " comment=" .. tostring(desc.comment)
              .. " admin_comment=" .. tostring(desc.admin_comment))
    elseif f[1] == "modify" then
        local bar = 2
        while f[bar] ~= "||" do bar = bar + 1 end
        local desc, rec = record(f, 2, bar - 1), record(f, bar + 1, #f)
        print("rc=" .. slurm_job_modify(desc, rec, {debug = {flag_default = 1}}, 0) .. " comment="
              .. tostring(desc.comment))
    elseif f[1] == "advise" then
        local options = record(f, 2, #f, true)
        local rc = slurm_cli_pre_submit(options, 0)
        io.stderr:flush()
        print("rc=" .. rc)
    elseif f[1] == "fill" then
        print("filled=" .. jobaware_fill(f[2] or "", {time_minutes = 60, cpus = 4}))
    elseif f[1] == "gpus" then
        print("gpus=" .. tostring(jobaware_gpus(f[2] or "")))
    end
end

for line in io.lines(arg[2]) do
    local f = fields(line)
    if f[1] == "timed" then
        local started = os.clock()
        table.remove(f, 1)
        run(f)
        print(string.format("cpu %.6f", os.clock() - started))
    else
        run(f)
    end
end
