package redisstore

import "github.com/redis/go-redis/v9"

// Every script takes KEYS[1] = the record hash and, when it notifies,
// KEYS[2] = the record's channel; both carry the same hash tag, so a script
// touches one Cluster slot. The publish command ("spublish", "publish" or
// "" for none) is the last argument. Replies are tables whose first element
// is a status word. Scripts run by EVALSHA: go-redis's Script.Run sends
// EVALSHA and falls back to EVAL (which caches the script) only on
// NOSCRIPT, so each script body crosses the wire once per server.

// luaFields is recordFields as Lua arguments; scripts that return a
// record return HMGET(rec, luaFields), positional, which decodeValues
// reads. Lua indexes: s=1 k=2 fp=3 st=4 f=5 a=6 in=7 r=8 m=9 c=10 l=11
// d=12 x=13.
const luaFields = "'s', 'k', 'fp', 'st', 'f', 'a', 'in', 'r', 'm', 'c', 'l', 'd', 'x'"

// claimScript: absent, or terminal and expired at ARGV[1] → write a new
// in_progress record (fence 1, or old fence + 1); in_progress held by the
// same attempt → "own" (the caller's earlier claim whose answer was lost);
// anything else → "exists", without writing. One HMGET reads everything
// the decision and the reply need. A new key gets only the fields it has
// (absent fields read as empty); a taken-over key has the old outcome's
// fields blanked.
//
// ARGV: now, attempt, fingerprint, intent, lease_until, scope, key, pub.
var claimScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, ` + luaFields + `)
local st = h[4]
local fence = 1
if st then
  local x = h[13]
  local expired = (st == 'succeeded' or st == 'failed') and x and x ~= '' and tonumber(x) <= tonumber(ARGV[1])
  if not expired then
    if st == 'in_progress' and h[6] == ARGV[2] then return {'own', h} end
    return {'exists', h}
  end
  fence = tonumber(h[5]) + 1
  redis.call('HSET', rec, 's', ARGV[6], 'k', ARGV[7], 'fp', ARGV[3], 'st', 'in_progress', 'f', fence,
    'a', ARGV[2], 'in', ARGV[4], 'r', '', 'm', '', 'c', ARGV[1], 'l', ARGV[5], 'd', '', 'x', '')
  redis.call('PERSIST', rec)
else
  redis.call('HSET', rec, 's', ARGV[6], 'k', ARGV[7], 'fp', ARGV[3], 'st', 'in_progress', 'f', 1,
    'a', ARGV[2], 'in', ARGV[4], 'c', ARGV[1], 'l', ARGV[5])
end
if ARGV[8] ~= '' then redis.call(ARGV[8], KEYS[2], 'c') end
return {'claimed', fence}
`)

// finishScript records an outcome for (fence, attempt). Terminal outcomes
// are accepted from in_progress or unknown and get a key TTL at
// ARGV[7] (ExpiresAt plus the grace, in Unix ms); unknown only from
// in_progress. The same outcome already recorded → "ok" without writing.
// The reply is the record after the call, built from the one HMGET and
// the values written, so Finish costs no second read.
//
// ARGV: fence, attempt, state, result, completed_at, expires_at, pexpireat, pub.
var finishScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, ` + luaFields + `)
local st = h[4]
if not st or h[5] ~= ARGV[1] or h[6] ~= ARGV[2] then return {'fenced'} end
local want = ARGV[3]
if st == want and (want == 'unknown' or h[8] == ARGV[4]) then
  return {'ok', h}
end
if want == 'unknown' then
  if st ~= 'in_progress' then return {'fenced'} end
  redis.call('HSET', rec, 'st', 'unknown', 'd', ARGV[5])
  h[12] = ARGV[5]
else
  if st ~= 'in_progress' and st ~= 'unknown' then return {'fenced'} end
  redis.call('HSET', rec, 'st', want, 'r', ARGV[4], 'd', ARGV[5], 'x', ARGV[6])
  if ARGV[7] ~= '' then redis.call('PEXPIREAT', rec, ARGV[7]) end
  h[8], h[12], h[13] = ARGV[4], ARGV[5], ARGV[6]
end
h[4] = want
if ARGV[8] ~= '' then redis.call(ARGV[8], KEYS[2], 'f') end
return {'ok', h}
`)

// releaseScript deletes the record held by (fence, attempt) while it is
// in_progress or unknown. Absent → "ok" (a retried release).
//
// ARGV: fence, attempt, pub.
var releaseScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, 'st', 'f', 'a')
if not h[1] then return {'ok'} end
if h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then return {'fenced'} end
if h[1] ~= 'in_progress' and h[1] ~= 'unknown' then return {'fenced'} end
redis.call('DEL', rec)
if ARGV[3] ~= '' then redis.call(ARGV[3], KEYS[2], 'r') end
return {'ok'}
`)

// heartbeatScript extends the lease of an in_progress record held by
// (fence, attempt). It does not notify: nothing a waiter cares about changed.
//
// ARGV: fence, attempt, lease_until.
var heartbeatScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, 'st', 'f', 'a')
if h[1] ~= 'in_progress' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then return {'fenced'} end
redis.call('HSET', rec, 'l', ARGV[3])
return {'ok'}
`)

// resolveScript moves a record in one of the From states (and with the
// given fence, unless it is "0") to To under fence + 1, or deletes it.
//
// ARGV: fence, from (space-separated), to, release ("1"/"0"), attempt,
// result, now, lease_until, expires_at, pexpireat, pub.
var resolveScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, 'st', 'f')
if not h[1] then return {'notfound'} end
if ARGV[1] ~= '0' and h[2] ~= ARGV[1] then return {'fenced'} end
local from = false
for s in string.gmatch(ARGV[2], '%S+') do
  if s == h[1] then from = true end
end
if not from then return {'fenced'} end
if ARGV[4] == '1' then
  redis.call('DEL', rec)
  if ARGV[11] ~= '' then redis.call(ARGV[11], KEYS[2], 'v') end
  return {'released'}
end
redis.call('HINCRBY', rec, 'f', 1)
if ARGV[3] == 'in_progress' then
  redis.call('HSET', rec, 'st', 'in_progress', 'a', ARGV[5], 'l', ARGV[8], 'd', '', 'r', '', 'x', '')
  redis.call('PERSIST', rec)
else
  redis.call('HSET', rec, 'st', ARGV[3], 'a', ARGV[5], 'r', ARGV[6], 'd', ARGV[7], 'x', ARGV[9])
  if ARGV[10] ~= '' then redis.call('PEXPIREAT', rec, ARGV[10]) else redis.call('PERSIST', rec) end
end
if ARGV[11] ~= '' then redis.call(ARGV[11], KEYS[2], 'v') end
return {'ok', redis.call('HMGET', rec, ` + luaFields + `)}
`)

// setMarkScript stores a reconciliation mark while the fence matches.
//
// ARGV: fence, mark.
var setMarkScript = redis.NewScript(`
local rec = KEYS[1]
local f = redis.call('HGET', rec, 'f')
if not f then return {'notfound'} end
if f ~= ARGV[1] then return {'fenced'} end
redis.call('HSET', rec, 'm', ARGV[2])
return {'ok'}
`)

// sweepScript deletes the record only if it is succeeded or failed and its
// stored expires_at is at or before ARGV[1], decided in the same script as
// the delete, so a record re-claimed a moment earlier survives.
//
// ARGV: now.
var sweepScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, 'st', 'x')
if (h[1] == 'succeeded' or h[1] == 'failed') and h[2] and h[2] ~= '' and tonumber(h[2]) <= tonumber(ARGV[1]) then
  redis.call('DEL', rec)
  return 1
end
return 0
`)
