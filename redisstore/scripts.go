package redisstore

import "github.com/redis/go-redis/v9"

// Every script takes KEYS[1] = the record hash and, when it notifies,
// KEYS[2] = the record's channel; both carry the same hash tag, so a script
// touches one Cluster slot. The publish command ("spublish", "publish" or
// "" for none) is the last argument. Replies are tables whose first element
// is a status word.

// claimScript: absent, or terminal and expired at ARGV[1] → write a new
// in_progress record (fence 1, or old fence + 1); in_progress held by the
// same attempt → "own" (the caller's earlier claim whose answer was lost);
// anything else → "exists", without writing.
//
// ARGV: now, attempt, fingerprint, intent, lease_until, scope, key, pub.
var claimScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, 'st', 'a', 'x')
local st = h[1]
if st then
  local expired = (st == 'succeeded' or st == 'failed') and h[3] and h[3] ~= '' and tonumber(h[3]) <= tonumber(ARGV[1])
  if not expired then
    if st == 'in_progress' and h[2] == ARGV[2] then
      return {'own', redis.call('HGETALL', rec)}
    end
    return {'exists', redis.call('HGETALL', rec)}
  end
end
redis.call('HSET', rec, 's', ARGV[6], 'k', ARGV[7], 'fp', ARGV[3], 'st', 'in_progress',
  'a', ARGV[2], 'in', ARGV[4], 'r', '', 'm', '', 'c', ARGV[1], 'l', ARGV[5], 'd', '', 'x', '')
local fence = redis.call('HINCRBY', rec, 'f', 1)
if st then redis.call('PERSIST', rec) end
if ARGV[8] ~= '' then redis.call(ARGV[8], KEYS[2], 'c') end
return {'claimed', fence}
`)

// finishScript records an outcome for (fence, attempt). Terminal outcomes
// are accepted from in_progress or unknown and get a key TTL at
// ARGV[7] (ExpiresAt plus the grace, in Unix ms); unknown only from
// in_progress. The same outcome already recorded → "ok" without writing.
//
// ARGV: fence, attempt, state, result, completed_at, expires_at, pexpireat, pub.
var finishScript = redis.NewScript(`
local rec = KEYS[1]
local h = redis.call('HMGET', rec, 'st', 'f', 'a', 'r')
local st = h[1]
if not st or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then return {'fenced'} end
local want = ARGV[3]
if st == want and (want == 'unknown' or h[4] == ARGV[4]) then
  return {'ok', redis.call('HGETALL', rec)}
end
if want == 'unknown' then
  if st ~= 'in_progress' then return {'fenced'} end
  redis.call('HSET', rec, 'st', 'unknown', 'd', ARGV[5])
else
  if st ~= 'in_progress' and st ~= 'unknown' then return {'fenced'} end
  redis.call('HSET', rec, 'st', want, 'r', ARGV[4], 'd', ARGV[5], 'x', ARGV[6])
  if ARGV[7] ~= '' then redis.call('PEXPIREAT', rec, ARGV[7]) end
end
if ARGV[8] ~= '' then redis.call(ARGV[8], KEYS[2], 'f') end
return {'ok', redis.call('HGETALL', rec)}
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
return {'ok', redis.call('HGETALL', rec)}
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
