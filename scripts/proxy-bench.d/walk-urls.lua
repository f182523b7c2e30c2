-- wrk script for scripts/proxy-bench: walks the URLs PREFIX1 ... PREFIXCOUNT in order (and
-- round again), and after STOP responses writes a result and stops wrk's thread.
--
--   wrk -t1 -cC -d300s -s walk-urls.lua http://HOST:PORT/ -- PREFIX COUNT STOP RESULT_FILE
--
-- RESULT_FILE gets one line, "RESPONSES OK SECONDS": the responses read (STOP), how many had a
-- 2xx status, and the wall time (CLOCK_MONOTONIC) from the first response to the last, that is
-- of the STOP - 1 request/response exchanges after the first (so neither wrk's start nor the
-- connection's set-up is counted). It is written to RESULT_FILE.tmp and renamed, so that a
-- reader never sees half of it.
--
-- wrk itself goes on sleeping until -d is over even when its only thread has stopped: the
-- script sends it SIGINT once RESULT_FILE is there (wrk then prints its usual summary, with
-- the socket errors, and exits).
--
-- Used for the warm-up of a URL set (several connections, every URL requested) and for the
-- cold pass (one connection: every request waits for the previous response, in order).
-- (wrk calls request() once more than it sends, to check the request's syntax: that call
-- takes PREFIX1, which the walk requests again when it wraps around, so with COUNT = STOP
-- every response is still for a distinct URL.)

local ffi = require("ffi")
ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } proxy_bench_timespec;
    int clock_gettime(int clock_id, proxy_bench_timespec *tp);
]]
local CLOCK_MONOTONIC = 1

local function now()
    local t = ffi.new("proxy_bench_timespec")
    ffi.C.clock_gettime(CLOCK_MONOTONIC, t)
    return tonumber(t.tv_sec) + tonumber(t.tv_nsec) * 1e-9
end

local prefix, count, stop_after, result_file
local next_index = 0
local responses, ok = 0, 0
local first = nil
local finished = false

function init(args)
    prefix = args[1]
    count = tonumber(args[2]) or 0
    stop_after = tonumber(args[3]) or 0
    result_file = args[4]
    if prefix == nil or count < 1 or stop_after < 1 or result_file == nil then
        error("walk-urls.lua: arguments: PREFIX COUNT STOP RESULT_FILE")
    end
end

function request()
    next_index = next_index % count + 1
    return wrk.format("GET", prefix .. next_index)
end

function response(status, headers, body)
    if finished then
        return
    end
    responses = responses + 1
    if status >= 200 and status < 300 then
        ok = ok + 1
    end
    if first == nil then
        first = now()
    end
    if responses >= stop_after then
        finished = true
        local elapsed = now() - first
        local f = assert(io.open(result_file .. ".tmp", "w"))
        f:write(string.format("%d %d %.6f\n", responses, ok, elapsed))
        f:close()
        assert(os.rename(result_file .. ".tmp", result_file))
        wrk.thread:stop()
    end
end
