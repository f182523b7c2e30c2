-- wrk script for scripts/proxy-bench: requests the URLs PREFIX1 ... PREFIXCOUNT at random,
-- uniformly or with a Zipf distribution, over wrk's keep-alive connections.
--
--   wrk -t1 -cC -dDs --latency -s random-urls.lua http://HOST:PORT/ -- MODE PREFIX COUNT SEED
--       [LIMIT RESULT_FILE]
--
-- MODE is "uniform" (every URL equally likely) or "zipf" (Zipf with s = 0.9: URL k is
-- requested with probability proportional to 1/k^0.9; URL 1 is the most popular). SEED seeds
-- math.random, so that every server of a round sees the same sequence of URLs.
--
-- With LIMIT and RESULT_FILE (scripts/redis-bench, one thread only): after LIMIT responses,
-- writes "RESPONSES OK" (OK: those with status 200) to RESULT_FILE and stops the thread; the
-- caller sends wrk SIGINT once the file is there (wrk sleeps until -d otherwise). Without
-- them no response() is defined, so wrk does not hand responses to Lua.

local requests = {}     -- the COUNT request strings, formatted once
local cdf = nil         -- zipf only: cdf[k] = P(index <= k), cdf[COUNT] = 1
local count = 0

function init(args)
    local mode, prefix = args[1], args[2]
    count = tonumber(args[3]) or 0
    local seed = tonumber(args[4]) or 1
    if (mode ~= "uniform" and mode ~= "zipf") or prefix == nil or count < 1 then
        error("random-urls.lua: arguments: uniform|zipf PREFIX COUNT [SEED]")
    end
    for i = 1, count do
        requests[i] = wrk.format("GET", prefix .. i)
    end
    if mode == "zipf" then
        cdf = {}
        local sum = 0
        for k = 1, count do
            sum = sum + k ^ -0.9
            cdf[k] = sum
        end
        for k = 1, count do
            cdf[k] = cdf[k] / sum
        end
        cdf[count] = 1
    end
    math.randomseed(seed)
    local limit, result_file = tonumber(args[5]), args[6]
    if limit and result_file then
        local done, ok = 0, 0
        response = function(status, headers, body)
            done = done + 1
            if status == 200 then
                ok = ok + 1
            end
            if done == limit then
                local file = io.open(result_file .. ".tmp", "w")
                file:write(done .. " " .. ok .. "\n")
                file:close()
                os.rename(result_file .. ".tmp", result_file)
                wrk.thread:stop()
            end
        end
    end
end

-- The smallest k with cdf[k] >= u, u uniform in [0, 1): a binary search.
local function zipf_index()
    local u = math.random()
    local lo, hi = 1, count
    while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if cdf[mid] < u then
            lo = mid + 1
        else
            hi = mid
        end
    end
    return lo
end

function request()
    if cdf then
        return requests[zipf_index()]
    end
    return requests[math.random(count)]
end
