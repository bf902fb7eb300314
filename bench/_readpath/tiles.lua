-- wrk script for bench/readpath.sh: each request GETs, with gzip accepted,
-- the checkpoint (a share READPATH_CHECKPOINT of requests, default 0.1) or a
-- full tile (data or hash) drawn at random from the list in READPATH_LIST
-- (one path a line, relative to the prefix, as find prints them).
local list = os.getenv("READPATH_LIST")
local share = tonumber(os.getenv("READPATH_CHECKPOINT") or "0.1")
local paths = {}
for line in io.lines(list) do
	paths[#paths + 1] = "/" .. line
end
if #paths == 0 then
	error("no tile paths in " .. list)
end

local headers = {
	["Accept-Encoding"] = "gzip",
	-- Skylight rate-limits clients without a contact in their User-Agent.
	["User-Agent"] = "mosaic-bench-readpath (bench@mosaic.invalid)",
}
if os.getenv("READPATH_HOST") then
	headers["Host"] = os.getenv("READPATH_HOST")
end

math.randomseed(os.time())

request = function()
	local p
	if math.random() < share then
		p = "/checkpoint"
	else
		p = paths[math.random(#paths)]
	end
	return wrk.format("GET", p, headers)
end
