-- SPDX-License-Identifier: ISC
-- wrk script for scripts/bench: prints one JSON line in egress-bench's
-- shape (requests, errors, rps, p50_us, p99_us, bytes_per_s) when the run
-- ends. With WRK_ABS_URL set, every request is sent in absolute form with
-- Host set to WRK_HOST, so that wrk (which connects to the URL it is
-- given, here the proxy) drives a forward proxy such as squid; with
-- WRK_PROXY_AUTH set, that is its Proxy-Authorization value. wrk's
-- byte count includes the response heads; egress-bench counts bodies.
local abs = os.getenv("WRK_ABS_URL")
if abs ~= nil and abs ~= "" then
	wrk.path = abs
	wrk.headers["Host"] = os.getenv("WRK_HOST")
	local auth = os.getenv("WRK_PROXY_AUTH")
	if auth ~= nil and auth ~= "" then
		wrk.headers["Proxy-Authorization"] = auth
	end
end

function done(summary, latency, requests)
	local e = summary.errors
	local secs = summary.duration / 1e6
	io.write(string.format(
	    '{"requests":%d,"errors":%d,"rps":%.1f,"p50_us":%d,' ..
	    '"p99_us":%d,"bytes_per_s":%.1f}\n',
	    summary.requests,
	    e.connect + e.read + e.write + e.status + e.timeout,
	    summary.requests / secs, latency:percentile(50),
	    latency:percentile(99), summary.bytes / secs))
end
