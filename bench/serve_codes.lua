-- wrk script for bench/serve_bench.sh's overload and sustained rows: the request of
-- bench/serve_post.lua, and a count of the answers by HTTP status, printed at the end as
-- "status CODE COUNT" lines (wrk itself only says "Non-2xx or 3xx responses").
dofile("bench/serve_post.lua")
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) codes = {} end
function response(status, headers, body) codes[status] = (codes[status] or 0) + 1 end
function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("codes")) do total[code] = (total[code] or 0) + n end
  end
  for code, n in pairs(total) do io.write(string.format("status %d %d\n", code, n)) end
end
-- SERVE_DELAY_MS (overload row): each connection pauses this long after each answer.
local pause = tonumber(os.getenv("SERVE_DELAY_MS") or "")
if pause then function delay() return pause end end
