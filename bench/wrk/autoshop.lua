-- wrk script for bench/run.sh: one request shape per BENCH_MODE, ids and dates varying per
-- request, and a machine-readable summary line ("BENCH {...}") at the end.
--
-- Environment: BENCH_MODE (path, range, date, last_name, phone, number, shop, post, post_keyed,
-- put, put_appointment, one, one_conditional, one_padded, availability),
-- BENCH_KEY (API key), BENCH_PATH (mode path), BENCH_FIRST_SHOP, BENCH_SHOPS,
-- BENCH_FIRST_DAY (epoch seconds of the data's first day), BENCH_DAYS, BENCH_FIRST_CUSTOMER,
-- BENCH_LAST_CUSTOMER, BENCH_CUSTOMERS (count, for customer numbers).

local mode = os.getenv("BENCH_MODE") or "path"
local key = os.getenv("BENCH_KEY") or ""
local path = os.getenv("BENCH_PATH") or "/api/v1/appointments"
local first_shop = tonumber(os.getenv("BENCH_FIRST_SHOP") or "1")
local shops = tonumber(os.getenv("BENCH_SHOPS") or "1")
local first_day = tonumber(os.getenv("BENCH_FIRST_DAY") or "0")
local days = tonumber(os.getenv("BENCH_DAYS") or "1")
local first_customer = tonumber(os.getenv("BENCH_FIRST_CUSTOMER") or "1")
local last_customer = tonumber(os.getenv("BENCH_LAST_CUSTOMER") or "1")
local customers = tonumber(os.getenv("BENCH_CUSTOMERS") or "1")

-- What people type into a search box: a piece of a last name, the last four digits of a phone.
local name_terms = { "smi", "son", "garc", "nguy", "will", "ander", "thom", "mart", "lee", "walk",
  "rob", "clar", "lop", "hern", "king", "wri", "scot", "gree", "bak", "adam", "mill", "ez", "patel", "ross" }
local makes = { {"Toyota", "Camry"}, {"Honda", "Civic"}, {"Ford", "F-150"}, {"Subaru", "Outback"}, {"Kia", "Sorento"} }
local bays = { "Bay 1", "Bay 2", "Bay 3" }

local headers = { ["Authorization"] = "Bearer " .. key, ["Content-Type"] = "application/json" }
local counter = 0
-- Built once: the request loop allocates as little as the plain modes do.
local conditional_headers = { ["Authorization"] = "Bearer " .. key, ["If-None-Match"] = '"00000000000000000000000000000000"' }
-- The same bytes under a header the server ignores: compared with conditional_headers, only the
-- conditional machinery differs (the load generator shares the cores and pays for every byte).
local padded_headers = { ["Authorization"] = "Bearer " .. key, ["X-None-Match1"] = '"00000000000000000000000000000000"' }
local keyed_headers = { ["Authorization"] = "Bearer " .. key, ["Content-Type"] = "application/json" }
local key_prefix = ""
local requests_sent = 0

function setup(thread)
  counter = counter + 1
  thread:set("thread_id", counter)
end

function init(args)
  math.randomseed(os.time() * 1000 + (thread_id or 0) * 7919)
  key_prefix = string.format("bench-%d-%d-", thread_id or 0, math.random(0, 1e9))
end

local function day(offset)
  return os.date("!%Y-%m-%d", first_day + offset * 86400)
end

local function shop()
  return first_shop + math.random(0, shops - 1)
end

request = function()
  if mode == "range" then
    local d = math.random(0, math.max(days - 7, 0))
    return wrk.format("GET", "/api/v1/appointments?filter%5Bshop_id%5D=" .. shop() .. "&start_date=" .. day(d) ..
      "&end_date=" .. day(d + 6) .. "&filter_by=appointment_start&sort=-date", headers)
  elseif mode == "availability" then
    -- One week of the first shop (20 bays), starting between today and 52 days ahead (the data
    -- runs 60 days past today; earlier starts would only drop past slots).
    local d = days - 60 + math.random(0, 52)
    return wrk.format("GET", "/api/v1/availability?filter%5Bshop_id%5D=" .. first_shop .. "&start_date=" .. day(d) ..
      "&end_date=" .. day(d + 6) .. "&hours=1.5", headers)
  elseif mode == "date" then
    return wrk.format("GET", "/api/v1/appointments?filter%5Bdate%5D=" .. day(math.random(0, days - 1)), headers)
  elseif mode == "last_name" then
    return wrk.format("GET", "/api/v1/customers?filter%5Blast_name%5D=" .. name_terms[math.random(#name_terms)], headers)
  elseif mode == "phone" then
    return wrk.format("GET", "/api/v1/customers?filter%5Bphone%5D=" .. string.format("%04d", math.random(0, 9999)), headers)
  elseif mode == "number" then
    return wrk.format("GET", "/api/v1/customers?filter%5Bcustomer_number%5D=" .. string.format("C%07d", math.random(1, customers)), headers)
  elseif mode == "shop" then
    return wrk.format("GET", "/api/v1/customers?filter%5Bshop_id%5D=" .. shop(), headers)
  elseif mode == "one" or mode == "one_conditional" or mode == "one_padded" then
    -- One customer by id; the conditional variant sends an If-None-Match that does not match,
    -- so both get the full 200 and the difference is the conditional machinery alone.
    return wrk.format("GET", "/api/v1/customers/" .. math.random(first_customer, last_customer),
      mode == "one_conditional" and conditional_headers or mode == "one_padded" and padded_headers or headers)
  elseif mode == "post" or mode == "post_keyed" then
    local v = makes[math.random(#makes)]
    local when = os.date("!%Y-%m-%dT%H:", os.time() + math.random(1, 60) * 86400) .. string.format("%02d:00", 15 * math.random(0, 3))
    local hour = string.format("%02d", math.random(8, 16))
    when = when:gsub("T%d%d:", "T" .. hour .. ":")
    local body = '{"shop_id":' .. shop() .. ',"date":"' .. when .. '","year":"' .. math.random(2005, 2025) ..
      '","make":"' .. v[1] .. '","model":"' .. v[2] .. '","home_phone":"","work_phone":"","cell_phone":"(555) 010-' ..
      string.format("%04d", math.random(0, 9999)) .. '","first_name":"Bench","last_name":"Load","reason":"Oil change","column":"' ..
      bays[math.random(#bays)] .. '","hours":1.5}'
    local h = headers
    if mode == "post_keyed" then
      requests_sent = requests_sent + 1
      keyed_headers["Idempotency-Key"] = key_prefix .. requests_sent
      h = keyed_headers
    end
    return wrk.format("POST", "/api/v1/appointments", h, body)
  elseif mode == "put_appointment" then
    -- One of the first 500 appointments, put in the first shop without a bay: after the first
    -- seconds every one is there, so the updates keep their shop, and all of them share one.
    local body = '{"shop_id":' .. first_shop .. ',"date":"2030-01-07T' .. string.format("%02d", math.random(8, 16)) ..
      ':00:00","year":"2020","make":"Toyota","model":"Camry","home_phone":"","work_phone":"","cell_phone":"","column":null}'
    return wrk.format("PUT", "/api/v1/appointments/" .. math.random(1, 500), headers, body)
  elseif mode == "put" then
    local id = math.random(first_customer, last_customer)
    local body = '{"phone":{"cell":"(555) 010-' .. string.format("%04d", math.random(0, 9999)) ..
      '"},"comments":"Called back ' .. math.random(1, 1000000) .. '"}'
    return wrk.format("PUT", "/api/v1/customers/" .. id, headers, body)
  else
    return wrk.format("GET", path, headers)
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCH {"requests":%d,"duration_us":%d,"rps":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,' ..
    '"non2xx":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.status, e.connect + e.read + e.write + e.timeout))
end
