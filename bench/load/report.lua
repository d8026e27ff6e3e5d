-- wrk script: counts non-200 answers per thread and prints the latency percentiles in one line.
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) non200 = 0 end
function response(status, headers, body) if status ~= 200 then non200 = non200 + 1 end end
function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("non200") end
  io.write(string.format("requests=%d errors_connect=%d errors_read=%d errors_write=%d errors_status=%d errors_timeout=%d\n",
    summary.requests, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout))
  io.write(string.format("latency_ms p50=%.2f p90=%.2f p99=%.2f max=%.2f\n", latency:percentile(50) / 1000,
    latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("non200=%d\n", bad))
end
