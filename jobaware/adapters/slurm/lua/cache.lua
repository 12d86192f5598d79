-- The verdict cache, as adapters/slurm/verdicts.py writes it and with the same nearest-shape rule.
-- Plain Lua 5.1, no modules. The parsed header lives in the global JOBAWARE_CACHE, which slurmctld keeps
-- between calls: each call reads only the header line (and a new header the trailer), then the submitting
-- user's own file, once per header.
JOBAWARE_CACHE_PATH = "@CACHE_PATH@"
JOBAWARE_STALE_AFTER = @STALE_AFTER@   -- seconds; the stricter of this and the file's own limit wins
JOBAWARE_MAX_BYTES = 64 * 1024 * 1024  -- a larger file is refused (fail open): parsing stays bounded
JOBAWARE_CACHE = JOBAWARE_CACHE or {header = nil}

local FIELDS = 12
local NO_VAL = 4294967294  -- Slurm's "not set" for 32-bit fields; larger numbers are "not set" too
-- What verdicts.py writes, in bytes: a longer field is not its (the file's text comes from user-named jobs, so it
-- is capped before anything reads it): a header line under 4096 bytes, numbers of at most 20 digits, names of 64
-- (Verdict's user, account, partition), a comment of COMMENT_MAX and advice of ADVICE_MAX characters of UTF-8
local HEADER_MAX = 4096
local DIGITS_MAX = 20
local NAME_MAX = 64
local COMMENT_BYTES = 4 * 200
local ADVICE_BYTES = 4 * 1000

local function split(line)
    local out, start = {}, 1
    while true do
        local tab = string.find(line, "\t", start, true)
        if not tab then
            out[#out + 1] = string.sub(line, start)
            return out
        end
        out[#out + 1] = string.sub(line, start, tab - 1)
        start = tab + 1
    end
end

-- floor(log2(value + 1)); nil (not stated) for nil, negative or Slurm's NO_VAL-like values
function jobaware_bucket(value)
    if value == nil or value < 0 or value >= NO_VAL then return nil end
    local v, b = math.floor(value) + 1, 0
    while v >= 2 do
        v = math.floor(v / 2)
        b = b + 1
    end
    return b
end

local function integer(text)
    if text == nil or #text > DIGITS_MAX or not string.find(text, "^%d+$") then return nil end
    return tonumber(text)
end

-- One record, or nil when any field is not what verdicts.py writes (a hand-edited or damaged line)
local function parse_record(f)
    if #f ~= FIELDS then return nil end
    local shape = {}
    for i = 4, 8 do
        shape[i - 3] = integer(f[i])
        if shape[i - 3] == nil then return nil end
    end
    local n, created = integer(f[9]), integer(f[10])
    if not n or not created or f[1] == "" or f[3] == "" or f[11] == "" then return nil end
    if #f[1] > NAME_MAX or #f[2] > NAME_MAX or #f[3] > NAME_MAX or #f[11] > COMMENT_BYTES
            or #f[12] > ADVICE_BYTES then
        return nil
    end
    return {user = f[1], account = f[2], partition = f[3], shape = shape, n_similar = n, created = created,
            comment = f[11], advice = f[12]}
end

-- The file behind `header` (already read from `f`). A file without its trailer, or whose trailer disagrees with
-- the header's count, is truncated: no verdicts at all rather than some. `body` is read only when asked for
-- (a user's file); of the cache file itself only the header and the trailer are read.
local function parse(f, header, body)
    local h = split(header)
    if #h ~= 8 or h[1] ~= "jobaware-verdicts" or h[2] ~= "2" or not integer(h[3]) or not integer(h[4])
            or not integer(h[5]) or not integer(h[7]) or not integer(h[8]) then
        return {header = header, error = "not a version 2 jobaware verdict cache"}
    end
    local trailer = "\nend\t" .. h[7] .. "\n"
    local text
    if body then
        text = "\n" .. (f:read("*a") or "")
    else
        local size = f:seek("end")
        f:seek("set", math.max(size - #trailer, 0))
        text = f:read("*a") or ""
    end
    if string.sub(text, -#trailer) ~= trailer then
        return {header = header, error = "truncated: no trailer for " .. h[7] .. " verdicts"}
    end
    return {header = header, created = tonumber(h[4]), stale_after = tonumber(h[5]), default_partition = h[6],
            max_age = tonumber(h[8]), body = body and string.sub(text, 1, -#trailer), users = {}}
end

-- The open file at `path` after a size check, positioned after its first line, and that line; or nil and why not.
-- A first line of HEADER_MAX bytes or more is no header (read no further: a file may hold one line of 64 MiB).
local function open(path)
    local f = io.open(path, "rb")
    if f == nil then return nil, "missing" end
    local size = f:seek("end")
    if size == nil or size > JOBAWARE_MAX_BYTES then
        f:close()
        return nil, "larger than " .. JOBAWARE_MAX_BYTES .. " bytes"
    end
    f:seek("set", 0)
    local head = f:read(HEADER_MAX)
    if head == nil then
        f:close()
        return nil, "empty"
    end
    local newline = string.find(head, "\n", 1, true)
    local header = newline and string.sub(head, 1, newline - 1) or head
    if newline == nil and #head == HEADER_MAX then header = "" end  -- no header: parse() calls it so
    f:seek("set", newline or #head)
    return f, header
end

-- Say at info level, at most once a minute, why there are no verdicts (the plugin fails open: nothing else
-- changes). JOBAWARE_SAID_WITHIN(now, seconds), defined by each plugin, tells whether it was said recently and
-- otherwise records `now`.
local function say(why, now)
    if not JOBAWARE_SAID_WITHIN(now, 60) then
        slurm.log_info("jobaware: verdict cache %s %s; no verdicts until it is fixed (failing open)",
                       JOBAWARE_CACHE_PATH, why)
    end
end

-- The lines of the user's own file (PATH.users/USER.tsv, see verdicts.py; `user` may also be "#UID", the link to
-- it by user id), indexed: exact[key], groups[account\tpartition], wider[partition]; kept until the cache file's
-- header changes. nil and why when the user's file is damaged or the folder of user files is missing.
local function user_index(cache, user)
    local index = cache.users[user]
    if index then return index end
    index = {exact = {}, groups = {}, wider = {}}
    if #user > NAME_MAX or not string.find(user, "^[%w._@+-]+$") and not string.find(user, "^#%d+$") then
        return index
    end
    local folder = JOBAWARE_CACHE_PATH .. ".users/"
    local f, header = open(folder .. user .. ".tsv")
    if f == nil and header == "missing" then
        local dir = io.open(folder .. ".", "rb")
        if dir == nil then return nil, "has no folder of user files " .. folder end
        dir:close()
        cache.users[user] = index  -- no verdicts for this user
        return index
    end
    if f == nil then return nil, "user file " .. user .. ".tsv " .. header end
    local ok, parsed = pcall(parse, f, header, true)
    f:close()
    if not ok then return nil, "user file " .. user .. ".tsv corrupt (" .. tostring(parsed) .. ")" end
    if parsed.error then return nil, "user file " .. user .. ".tsv corrupt (" .. parsed.error .. ")" end
    local bad = 0
    for line in string.gmatch(parsed.body, "[^\n]+") do
        local r = parse_record(split(line))
        if r == nil then
            bad = bad + 1
        else
            local group = r.account .. "\t" .. r.partition
            local key = group .. "\t" .. table.concat(r.shape, ",")
            if index.exact[key] == nil then index.exact[key] = r end
            index.groups[group] = index.groups[group] or {}
            table.insert(index.groups[group], r)
            index.wider[r.partition] = index.wider[r.partition] or {}
            table.insert(index.wider[r.partition], r)
        end
    end
    if bad > 0 then
        (JOBAWARE_LOG or slurm.log_info)("jobaware: %s: skipped %d malformed verdict lines of user %s",
                                         JOBAWARE_CACHE_PATH, bad, user)
    end
    cache.users[user] = index
    return index
end

-- Whether a file is at `path`, readable or not (io.open's error is "No such file or directory", errno 2, only when
-- there is none)
local function present(path)
    local f, _, code = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil or code ~= 2
end

-- The cache (its header, from the file at `path`: the cache itself, or for the CLI filters, which may not read it,
-- its header file, read while the cache file is there), or nil and why there is none (missing, too large, corrupt,
-- stale; said at info level at most once a minute). Lookups in it leave out the verdicts older than the file's max
-- age at `now`.
function jobaware_load(now, path)
    if path and not present(JOBAWARE_CACHE_PATH) then
        say("missing", now)
        return nil, "missing"
    end
    local f, header = open(path or JOBAWARE_CACHE_PATH)
    if f == nil and path and header == "missing" then header = "has no header file " .. path end
    if f == nil then
        say(header, now)
        return nil, header
    end
    if header ~= JOBAWARE_CACHE.header then
        local ok, parsed = pcall(parse, f, header, false)
        JOBAWARE_CACHE = ok and parsed or {header = header, error = tostring(parsed)}
    end
    f:close()
    local cache = JOBAWARE_CACHE
    local why
    if cache.error then
        why = "corrupt (" .. cache.error .. ")"
    else
        local limit = math.min(cache.stale_after, JOBAWARE_STALE_AFTER)
        if now - cache.created > limit then
            why = "stale (written " .. (now - cache.created) .. " s ago, limit " .. limit .. " s)"
        end
    end
    if why then
        say(why, now)
        return nil, why
    end
    cache.now = now
    return cache
end

local function current(cache, r)
    return cache.now - r.created <= cache.max_age
end

local function nearest(cache, candidates, query)
    local best, best_d = nil, nil
    for _, r in ipairs(candidates) do
        if current(cache, r) then
            local d = 0
            for i = 1, 5 do
                if query[i] ~= nil then d = d + math.abs(query[i] - r.shape[i]) end
            end
            if best == nil or d < best_d or (d == best_d and r.n_similar > best.n_similar) then
                best, best_d = r, d
            end
        end
    end
    return best
end

-- The verdict for (user, account, partition, shape buckets {t, n, c, m, g}; nil = not stated), and how
-- it was found: "exact", "nearest" or "user+partition". nil when the cache holds no current verdict for it.
-- nil and why when the user's file cannot be read (said at info level at most once a minute).
function jobaware_lookup(cache, user, account, partition, query)
    local index, why = user_index(cache, user)
    if index == nil then
        say(why, cache.now)
        return nil, why
    end
    local group = (account or "") .. "\t" .. partition
    local complete = query[1] and query[2] and query[3] and query[4] and query[5]
    if complete then
        local r = index.exact[group .. "\t" .. table.concat(query, ",")]
        if r and current(cache, r) then return r, "exact" end
    end
    local r = index.groups[group] and nearest(cache, index.groups[group], query)
    if r then return r, "nearest" end
    r = index.wider[partition] and nearest(cache, index.wider[partition], query)
    if r then return r, "user+partition" end
    return nil
end

-- The number that ends `text` from `first` to `last` after a colon (Lua's ":(%d+)$"), or nil: a byte loop from the end
local function count_at_end(text, first, last)
    local i = last
    while i >= first do
        local b = string.byte(text, i)
        if b < 48 or b > 57 then break end
        i = i - 1
    end
    if i == last or i < first or string.byte(text, i) ~= 58 then return nil end
    return tonumber(string.sub(text, i + 1, last))
end

-- Numbers from a TRES/GRES string such as "gres:gpu:2", "gres/gpu:a100:4" or "gpu:1,gres:shard:2" (the callers
-- cap its length): plain scans, item by item
function jobaware_gpus(tres)
    if tres == nil then return nil end
    local total, seen, first = 0, false, 1
    local gpu = string.find(tres, "gpu", 1, true)  -- the next "gpu" at or after `first`, found once
    while gpu and first <= #tres do
        local comma = string.find(tres, ",", first, true) or #tres + 1
        if gpu + 2 < comma then
            seen = true
            total = total + (count_at_end(tres, first, comma - 1) or 1)
        end
        first = comma + 1
        if gpu < first then gpu = string.find(tres, "gpu", first, true) end
    end
    if seen then return total end
    return 0
end

-- The verdict for a job's comment, e.g. "jobaware: failure risk 71%, TIMEOUT likely; model 3; io-bound"
function jobaware_comment(r, how)
    if how ~= "exact" then return "jobaware: " .. r.comment .. "; " .. how .. " shape" end
    return "jobaware: " .. r.comment
end

-- For each "[" of `text`, the "]" that balances it (what Lua's "%b[]" would match from there), in one pass with a
-- stack: "%b[]" itself scans to the end from every "[" it cannot balance, which is quadratic in a run of them
local function balancing(text)
    local close, open = {}, {}
    local at = string.find(text, "[%[%]]")
    while at do
        if string.byte(text, at) == 91 then
            open[#open + 1] = at
        elseif #open > 0 then
            close[open[#open]] = at
            open[#open] = nil
        end
        at = string.find(text, "[%[%]]", at + 1)
    end
    return close
end

-- `text` with {name} replaced by asked[name] (a number the job asks for); words in square brackets around a
-- name the job does not state are left out. Linear in `text` (the cache caps it at ADVICE_BYTES): "{([%w_]+)}"
-- backtracks only over the run of name characters after a "{", and such runs do not overlap.
function jobaware_fill(text, asked)
    local function value(name)
        local v = asked[name]
        if v == nil then return nil end
        return string.format("%d", math.floor(v + 0.5))
    end
    local close, out, from = balancing(text), {}, 1
    local at = string.find(text, "[", 1, true)
    while at do
        if close[at] then
            local missing = false
            local filled = string.gsub(string.sub(text, at + 1, close[at] - 1), "{([%w_]+)}", function(name)
                local v = value(name)
                if v == nil then missing = true end
                return v or ""
            end)
            out[#out + 1] = string.sub(text, from, at - 1)
            if not missing then out[#out + 1] = filled end
            from = close[at] + 1
            at = string.find(text, "[", from, true)
        else
            at = string.find(text, "[", at + 1, true)
        end
    end
    out[#out + 1] = string.sub(text, from)
    return (string.gsub(table.concat(out), "{([%w_]+)}", function(name) return value(name) or "?" end))
end
