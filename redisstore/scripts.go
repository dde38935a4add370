package redisstore

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every script takes KEYS[1] = the record key and, when it notifies,
// KEYS[2] = the record's channel; both carry the same hash tag, so a script
// touches one Cluster slot. The publish command ("spublish", "publish" or
// "" for none) is the last argument, except in the finish script, which
// has it built in. A script answers with a status word ("ok", "fenced",
// "notfound", "released") or with a stored value, which always starts
// with the layout version "I1" and so is never mistaken for a status word
// (the finish script also answers 1, see finishTemplate). Scripts run by EVALSHA: go-redis's Script.Run sends
// EVALSHA and falls back to EVAL (which caches the script) only on
// NOSCRIPT, so each script body crosses the wire once per server.
//
// State codes and the layout are in codec.go.

// luaParse decodes a value into its fields (st, f, a, tok, x, d, r, l, c,
// m) and the unchanged tail (scope, key, fingerprint, intent); luaPack
// encodes them back. A value of another layout raises an error. Only the
// scripts off the first-request path use them; Finish reads just what it
// needs.
const luaParse = `
local function parse(v)
  if string.sub(v, 1, 2) ~= 'I1' then error('redisstore: record is not in layout I1') end
  local r = {st = string.sub(v, 3, 3)}
  local i = string.find(v, ':', 4, true)
  local j = string.find(v, ':', i + 1, true)
  local aend = j + tonumber(string.sub(v, i + 1, j - 1))
  r.f = string.sub(v, 4, i - 1)
  r.a = string.sub(v, j + 1, aend)
  r.tok = string.sub(v, 4, aend)
  local e = string.find(v, ';', aend + 1, true)
  r.x = string.sub(v, aend + 1, e - 1)
  local d = string.find(v, ';', e + 1, true)
  r.d = string.sub(v, e + 1, d - 1)
  local c = string.find(v, ':', d + 1, true)
  local rend = c + tonumber(string.sub(v, d + 1, c - 1))
  r.r = string.sub(v, c + 1, rend)
  local l = string.find(v, ';', rend + 1, true)
  r.l = string.sub(v, rend + 1, l - 1)
  local cr = string.find(v, ';', l + 1, true)
  r.c = string.sub(v, l + 1, cr - 1)
  local m = string.find(v, ':', cr + 1, true)
  local mend = m + tonumber(string.sub(v, cr + 1, m - 1))
  r.m = string.sub(v, m + 1, mend)
  r.tail = string.sub(v, mend + 1)
  return r
end
local function pack(r)
  return 'I1' .. r.st .. r.f .. ':' .. #r.a .. ':' .. r.a .. r.x .. ';' .. r.d .. ';' ..
    #r.r .. ':' .. r.r .. r.l .. ';' .. r.c .. ';' .. #r.m .. ':' .. r.m .. r.tail
end
local function expired(r, now)
  return (r.st == 's' or r.st == 'f') and r.x ~= '' and tonumber(r.x) <= tonumber(now)
end
`

// claimScript writes a new in_progress record when none exists or the
// stored one is terminal and expired at ARGV[1] (fence 1, or old fence +
// 1), and answers with the fence it wrote. Otherwise it answers with the
// stored value and writes nothing; the caller tells its own claim from
// another's. It is the claim for servers without SET NX GET (before Redis
// 7.0) and, on others, the take-over of an expired record that SET NX GET
// returned. The SET drops any TTL the expired record had.
//
// ARGV: now, value before the fence, value after the fence.
var claimScript = redis.NewScript(luaParse + `
local v = redis.call('GET', KEYS[1])
local fence = 1
if v then
  local r = parse(v)
  if not expired(r, ARGV[1]) then return v end
  fence = tonumber(r.f) + 1
end
redis.call('SET', KEYS[1], ARGV[2] .. string.format('%d', fence) .. ARGV[3])
return fence
`)

// finishTemplate (the finish script, Store.finish) records an outcome
// for the holder token (fence and attempt) in the new value ARGV[2]. Terminal outcomes are accepted from
// in_progress or unknown and set the key's TTL (ARGV[3]: ExpiresAt plus
// the grace, Unix ms, or empty for none); unknown only from in_progress.
// The same outcome already recorded → the stored value, without writing.
//
// ARGV[1], when not empty, is the caller's claim: the exact in_progress
// value its Claim wrote, and ARGV[2] is then the exact new value (the
// claim with the outcome over it). When the stored value is the claim,
// the script writes ARGV[2] and answers 1: one string comparison, and the
// caller builds the record from its claim. Finish's first-time path is
// this one, so it does no decoding in Lua.
//
// Otherwise (no claim given, or a heartbeat or a mark changed the value
// since, or the outcome is already recorded, or another attempt holds the
// key) the script compares the token as a prefix of the stored value and
// answers the value it leaves, or a status word. ARGV[2] is then read as
// "I1" state token expires ";" completed ";" len ":" result (anything
// after the result is ignored), or "I1u" token ";" completed ";" for
// unknown; the script keeps the rest of the stored value, found with three
// searches.
//
// The first-time path does not publish: a value still equal to the claim
// has no subscriber to wake, because every subscriber marks the record
// first (markAwaitedScript), which makes the value differ from the claim.
// The other path publishes. The publish command is part of the script
// (finishLua), not an argument as in the other scripts: the server turns
// each argument into a Lua string in a table, about 1,200 instructions of
// its ~45,000 per call.
//
// ARGV: claim value or "", new value, pxat or "".
const finishTemplate = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] and v ~= '' then
  if ARGV[3] == '' then
    redis.call('SET', KEYS[1], ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[3])
  end
  return 1
end
if not v then return 'fenced' end
if string.sub(v, 1, 2) ~= 'I1' then error('redisstore: record is not in layout I1') end
local a = ARGV[2]
local want = string.sub(a, 3, 3)
local i = string.find(a, ':', 4, true)
local j = string.find(a, ':', i + 1, true)
local p = j + 1 + tonumber(string.sub(a, i + 1, j - 1))
if string.sub(v, 4, p - 1) ~= string.sub(a, 4, p - 1) then return 'fenced' end
local st = string.sub(v, 3, 3)
local e = string.find(v, ';', p, true)
local d = string.find(v, ';', e + 1, true)
local c = string.find(v, ':', d + 1, true)
local rend = c + tonumber(string.sub(v, d + 1, c - 1))
local new
if want == 'u' then
  if st == 'u' then return v end
  if st ~= 'p' then return 'fenced' end
  new = a .. string.sub(v, d + 1)
  redis.call('SET', KEYS[1], new)
else
  local ae = string.find(a, ';', p, true)
  local ad = string.find(a, ';', ae + 1, true)
  local ac = string.find(a, ':', ad + 1, true)
  local aend = ac + tonumber(string.sub(a, ad + 1, ac - 1))
  if st == want and string.sub(v, c + 1, rend) == string.sub(a, ac + 1, aend) then return v end
  if st ~= 'p' and st ~= 'u' then return 'fenced' end
  new = string.sub(a, 1, aend) .. string.sub(v, rend + 1)
  if ARGV[3] == '' then
    redis.call('SET', KEYS[1], new)
  else
    redis.call('SET', KEYS[1], new, 'PXAT', ARGV[3])
  end
end
PUBLISH
return new
`

// finishLua is the finish script's body for the publish command pub
// ("spublish", "publish" or "" for none).
func finishLua(pub string) string {
	call := ""
	if pub != "" {
		call = "redis.call('" + pub + "', KEYS[2], 'f')"
	}
	return strings.ReplaceAll(finishTemplate, "PUBLISH", call)
}

// releaseScript deletes the record held by token ARGV[1] while it is
// in_progress or unknown. Absent → "ok" (a retried release).
//
// ARGV: token, pub.
var releaseScript = redis.NewScript(luaParse + `
local v = redis.call('GET', KEYS[1])
if not v then return 'ok' end
local r = parse(v)
if r.tok ~= ARGV[1] or (r.st ~= 'p' and r.st ~= 'u') then return 'fenced' end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], 'r') end
return 'ok'
`)

// heartbeatScript extends the lease of an in_progress record held by token
// ARGV[1], keeping the awaited mark (see markAwaitedScript). It does not
// notify: nothing a waiter cares about changed.
//
// ARGV: token, lease_until.
var heartbeatScript = redis.NewScript(luaParse + luaAwaited + `
local v = redis.call('GET', KEYS[1])
if not v then return 'fenced' end
local r = parse(v)
if r.st ~= 'p' or r.tok ~= ARGV[1] then return 'fenced' end
if awaited(r.l) and markable(ARGV[2]) then r.l = '0' .. ARGV[2] else r.l = ARGV[2] end
redis.call('SET', KEYS[1], pack(r), 'KEEPTTL')
return 'ok'
`)

// luaAwaited tells an awaited lease (one marked with a leading '0') and a
// lease that can take the mark (a positive time without one).
const luaAwaited = `
local function awaited(l) return #l > 1 and string.sub(l, 1, 1) == '0' end
local function markable(l) local c = string.sub(l, 1, 1) return c >= '1' and c <= '9' end
`

// markAwaitedScript marks an in_progress record as awaited: its lease is
// written with a leading '0', which every reader decodes as the same time
// (Go's decoder and Lua's tonumber read digits), but which no value built
// by a client contains. A finish whose claim is the stored value exactly,
// its first-time path, therefore knows no subscriber marked the record and
// skips the publish; a marked record takes the finish's other path, which
// publishes. Store.Subscribe runs this once the subscription is confirmed,
// so a finish after Subscribe returns publishes, and a finish before it
// left a record the mark does not touch (the waiter then reads it). Any
// other value (absent, terminal, unknown, already marked) is left as it
// is.
var markAwaitedScript = redis.NewScript(luaParse + luaAwaited + `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 3) ~= 'I1p' then return 0 end
local r = parse(v)
if not markable(r.l) then return 0 end
r.l = '0' .. r.l
redis.call('SET', KEYS[1], pack(r), 'KEEPTTL')
return 1
`)

// resolveScript moves a record whose state code is in ARGV[2] (and with
// fence ARGV[1], unless it is "0") to state ARGV[3] under fence + 1, or
// deletes it; the answer is the new value, or "released".
//
// ARGV: fence, from (state codes), to (state code), release ("1"/"0"),
// attempt, result, now, lease_until, expires_at, pexpireat, pub.
var resolveScript = redis.NewScript(luaParse + `
local v = redis.call('GET', KEYS[1])
if not v then return 'notfound' end
local r = parse(v)
if ARGV[1] ~= '0' and r.f ~= ARGV[1] then return 'fenced' end
if not string.find(ARGV[2], r.st, 1, true) then return 'fenced' end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[1])
  if ARGV[11] ~= '' then redis.call(ARGV[11], KEYS[2], 'v') end
  return 'released'
end
r.f = string.format('%d', tonumber(r.f) + 1)
r.st, r.a = ARGV[3], ARGV[5]
local new
if ARGV[3] == 'p' then
  r.l, r.d, r.r, r.x = ARGV[8], '', '', ''
  new = pack(r)
  redis.call('SET', KEYS[1], new)
else
  r.r, r.d, r.x = ARGV[6], ARGV[7], ARGV[9]
  new = pack(r)
  if ARGV[10] ~= '' then
    redis.call('SET', KEYS[1], new, 'PXAT', ARGV[10])
  else
    redis.call('SET', KEYS[1], new)
  end
end
if ARGV[11] ~= '' then redis.call(ARGV[11], KEYS[2], 'v') end
return new
`)

// setMarkScript stores a reconciliation mark while the fence matches,
// keeping the key's TTL.
//
// ARGV: fence, mark.
var setMarkScript = redis.NewScript(luaParse + `
local v = redis.call('GET', KEYS[1])
if not v then return 'notfound' end
local r = parse(v)
if r.f ~= ARGV[1] then return 'fenced' end
r.m = ARGV[2]
redis.call('SET', KEYS[1], pack(r), 'KEEPTTL')
return 'ok'
`)

// sweepScript deletes the record only if it is succeeded or failed and its
// stored expires_at is at or before ARGV[1], decided in the same script as
// the delete, so a record re-claimed a moment earlier survives.
//
// ARGV: now.
var sweepScript = redis.NewScript(luaParse + `
local v = redis.call('GET', KEYS[1])
if v and expired(parse(v), ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)
