package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentc-dev/agentc/internal/storeaddr"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Kind is the store kind this package registers.
const Kind = "redis"

// DefaultPrefix namespaces the keys of a store without a prefix.
const DefaultPrefix = "agentc"

func init() {
	runtime.RegisterStoreKind(Kind, func(ctx context.Context, name string, s plan.Store) (runtime.StoreBackend, error) {
		url, err := URL(s)
		if err != nil {
			return nil, err
		}
		timeout, err := s.OpTimeout()
		if err != nil {
			return nil, err
		}
		return Open(ctx, url, s.Prefix, WithTimeout(timeout))
	})
}

// Option adjusts how Open and OpenOptions open a store.
type Option func(*config)

type config struct{ timeout time.Duration }

// WithTimeout bounds each operation of the store by d (a positive duration;
// plan.DefaultStoreTimeout without this option): see OpenOptions.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// URL returns the server URL of a networked plan store: its url, else the
// value of the environment variable its url_env names. Either missing is an
// error naming what to set.
func URL(s plan.Store) (string, error) {
	if s.URL != "" {
		return s.URL, nil
	}
	if s.URLEnv == "" {
		return "", errors.New("the store needs url or url_env")
	}
	u := os.Getenv(s.URLEnv)
	if u == "" {
		return "", fmt.Errorf("environment variable %s (the store's url_env) is not set", s.URLEnv)
	}
	return u, nil
}

// Store is a Redis server seen through one client. It is safe for
// concurrent use.
type Store struct {
	c      *goredis.Client
	prefix string
	// timeout bounds each operation, from its call to its answer.
	timeout time.Duration
	// eviction is the server's setting that evicts keys under memory
	// pressure, read when the store was opened ("": none); evictsAll is
	// set when keys without an expiry may go too.
	eviction  string
	evictsAll bool
}

// Open connects to the server at url, checks that it answers, and returns
// the store whose keys start with prefix + ":" (DefaultPrefix when empty).
func Open(ctx context.Context, url, prefix string, opts ...Option) (*Store, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		// Not the URL: it may hold a password.
		return nil, fmt.Errorf("redis url: %w", storeaddr.Unquoted(err))
	}
	return OpenOptions(ctx, opt, prefix, opts...)
}

// OpenOptions is Open with client options the caller prepared (from
// goredis.ParseURL, with a dialer or pool sizes of its own). It turns the
// client's retries off.
//
// Opening (connecting, the ping, the read of the memory settings) and each
// operation of the store (a port's method, Records) are bounded as a whole by
// the store's timeout (WithTimeout), from its call to its answer: the
// wait for a pooled connection, dialing (the client's own attempts to dial
// again included) and the command share it, and a caller's shorter
// deadline is honoured too. The client's dial, read and write timeouts
// and the wait for a pooled connection are also set to it unless the
// options set them shorter (dial_timeout, read_timeout, write_timeout,
// pool_timeout in the URL; a longer one, or one turned off, gives way to
// the store's). An operation that times out fails with a timeout error; a
// script the server had already received may still run once it gets to
// it, as when its answer is lost.
func OpenOptions(ctx context.Context, opt *goredis.Options, prefix string, opts ...Option) (*Store, error) {
	cfg := config{timeout: plan.DefaultStoreTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	// A write must not be replayed behind the layer's back: -1 turns the
	// client's retries off (0 is its default of three).
	opt.MaxRetries = -1
	// The store's timeout bounds every command: a timeout of the options
	// may be shorter, not longer, nor turned off (-1, or 0 in the URL).
	for _, d := range []*time.Duration{&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout} {
		if *d <= 0 || *d > cfg.timeout {
			*d = cfg.timeout
		}
	}
	opt.ContextTimeoutEnabled = true
	c := goredis.NewClient(opt)
	// Opening is bounded by the timeout as a whole, as an operation is:
	// connecting, the handshake, the ping and the read of the memory
	// settings share it.
	octx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := c.Ping(octx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := &Store{c: c, prefix: prefix + ":", timeout: cfg.timeout}
	s.eviction, s.evictsAll = eviction(octx, c)
	return s, nil
}

// eviction reads the server's memory settings (INFO memory): with a
// maxmemory, a maxmemory-policy other than noeviction drops keys before
// their expiry when memory runs short (volatile-*: keys with an expiry;
// allkeys-*: any). A server that does not answer INFO (a proxy in front of
// it) is taken to evict nothing.
func eviction(ctx context.Context, c *goredis.Client) (string, bool) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return "", false
	}
	var maxmemory, policy string
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "maxmemory":
			maxmemory = v
		case "maxmemory_policy":
			policy = v
		}
	}
	if maxmemory == "" || maxmemory == "0" || policy == "" || policy == "noeviction" {
		return "", false
	}
	return "maxmemory-policy " + policy + ", maxmemory " + maxmemory + " bytes", strings.HasPrefix(policy, "allkeys-")
}

// Eviction implements runtime.Evictor: the server's setting that evicts
// keys under memory pressure, as it was when the store was opened.
func (s *Store) Eviction() (string, bool) { return s.eviction, s.evictsAll }

// op returns the context of one operation under ctx: ctx bounded by the
// store's timeout, which so covers the whole call (waiting for a pooled
// connection, dialing, each dial the client tries again, the command and
// its answer, a script sent again after NOSCRIPT), not only each of them.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Client returns the underlying client.
func (s *Store) Client() *goredis.Client { return s.c }

// Prefix returns the key prefix, colon included.
func (s *Store) Prefix() string { return s.prefix }

// Close closes the client.
func (s *Store) Close() error { return s.c.Close() }

func (s *Store) k(key string) string { return s.prefix + key }

// Get implements runtime.KV.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	b, err := s.c.Get(ctx, s.k(key)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("redis get: %w", err)
	}
	return b, true, nil
}

// Set implements runtime.KV.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.c.Set(ctx, s.k(key), value, max(ttl, 0)).Err(); err != nil {
		return fmt.Errorf("redis set: %w", err)
	}
	return nil
}

// SetIfAbsent implements runtime.KV (SET NX).
func (s *Store) SetIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := s.c.SetArgs(ctx, s.k(key), value, goredis.SetArgs{Mode: "NX", TTL: max(ttl, 0)}).Err()
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("redis set-if-absent: %w", err)
	}
	return true, nil
}

// Delete implements runtime.KV.
func (s *Store) Delete(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.c.Del(ctx, s.k(key)).Err(); err != nil {
		return fmt.Errorf("redis delete: %w", err)
	}
	return nil
}

// Append implements runtime.AuditSink: XADD of the record's JSON to the
// stream <prefix>:audit.
func (s *Store) Append(ctx context.Context, r runtime.AuditRecord) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("redis audit: encode: %w", err)
	}
	if err := s.c.XAdd(ctx, &goredis.XAddArgs{Stream: s.prefix + "audit", Values: []any{"r", b}}).Err(); err != nil {
		return fmt.Errorf("redis audit append: %w", err)
	}
	return nil
}

// recordsPage is how many audit entries Records reads with one XRANGE.
var recordsPage int64 = 1000

// Records returns the audit records in append order; a non-empty runID
// selects one run's. The stream is read a page (recordsPage entries) at a
// time, each page under its own operation timeout, so that a long stream
// is read whole; ctx bounds the whole read.
func (s *Store) Records(ctx context.Context, runID string) ([]runtime.AuditRecord, error) {
	var out []runtime.AuditRecord
	for from := "-"; ; {
		msgs, err := s.recordsPage(ctx, from)
		if err != nil {
			return nil, fmt.Errorf("redis audit records: %w", err)
		}
		for _, m := range msgs {
			v, _ := m.Values["r"].(string)
			var r runtime.AuditRecord
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				return nil, fmt.Errorf("redis audit records: entry %s: %w", m.ID, err)
			}
			if runID == "" || r.RunID == runID {
				out = append(out, r)
			}
		}
		if int64(len(msgs)) < recordsPage {
			return out, nil
		}
		if from, err = nextStreamID(msgs[len(msgs)-1].ID); err != nil {
			return nil, fmt.Errorf("redis audit records: %w", err)
		}
	}
}

// recordsPage reads the audit entries from the ID from on, at most
// recordsPage of them, under one operation timeout.
func (s *Store) recordsPage(ctx context.Context, from string) ([]goredis.XMessage, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.c.XRangeN(ctx, s.prefix+"audit", from, "+", recordsPage).Result()
}

// nextStreamID returns the stream entry ID just after id (ms-seq), the
// first a page after the entry id starts from (an exclusive range would
// need Redis 6.2).
func nextStreamID(id string) (string, error) {
	ms, seq, ok := strings.Cut(id, "-")
	m, err1 := strconv.ParseUint(ms, 10, 64)
	n, err2 := strconv.ParseUint(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return "", fmt.Errorf("entry ID %q is not ms-seq", id)
	}
	if n == math.MaxUint64 {
		return strconv.FormatUint(m+1, 10) + "-0", nil
	}
	return ms + "-" + strconv.FormatUint(n+1, 10), nil
}

// Lua scripts. Each reads the server clock, so every replica judges leases
// and rates by one time.
var (
	// KEYS: record, fence counter. ARGV: lease ms, keep ms, takeover,
	// owner ('' none), note ('' none). Returns {status, token, in_doubt,
	// result or remaining ms, the note of a claim held or in doubt}. A
	// claim keeps its note (field note) until an outcome replaces it; a
	// claim in doubt is taken over only by a caller with the same note
	// (none and empty alike), or, when it has none, by any caller, whose
	// note it keeps; else the answer is in doubt with its note. A claim
	// lives keep but never less than its lease, so a
	// claim renewed past keep is not dropped and claimed again. A claim
	// records its owner with its token (field owner, "<owner> <token>"):
	// the same owner asking again gets the claim, its lease running from
	// now; a takeover, by any build, changes the token and so ends the
	// match. A fence counter that is missing (a new prefix, or a server
	// flushed while claims were held) starts from the server's clock in
	// microseconds, past the tokens a counter started earlier has given
	// (unless it gave more than a million a second), so that a holder of a
	// claim made before a flush cannot publish or release one made after
	// it. Tokens are written out as integers (below 2^53, exact in Lua).
	// A record no build writes (no state, another state, a claim without
	// a lease end: damaged) may be the claim or the outcome of a call that
	// ran: it is in doubt, the reply's sixth element saying why, and a
	// takeover replaces it (in_doubt set).
	acquireScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function fence()
  if redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
  end
  return string.format('%.0f', redis.call('INCR', KEYS[2]))
end
local lease, keep, owner, note = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4] or '', ARGV[5] or ''
local st = redis.call('HMGET', KEYS[1], 'state', 'token', 'until', 'result', 'owner', 'note')
local damaged
if not st[1] then
  if redis.call('EXISTS', KEYS[1]) == 1 then damaged = 'it has no state' end
elseif st[1] ~= 'pending' and st[1] ~= 'done' then
  damaged = 'state "' .. st[1] .. '" is neither pending nor done'
elseif st[1] == 'pending' and not tonumber(st[3]) then
  damaged = 'its lease end is not a number'
end
if damaged then
  if ARGV[3] ~= '1' then return {3, 0, 0, '', '', damaged} end
  redis.call('DEL', KEYS[1])
  st = {false}
end
if not st[1] then
  local tok = fence()
  redis.call('HSET', KEYS[1], 'state', 'pending', 'token', tok, 'until', now + lease)
  if owner ~= '' then redis.call('HSET', KEYS[1], 'owner', owner .. ' ' .. tok) end
  if note ~= '' then redis.call('HSET', KEYS[1], 'note', note) end
  if keep > 0 then redis.call('PEXPIRE', KEYS[1], math.max(keep, lease)) end
  return {0, tonumber(tok), damaged and 1 or 0, ''}
end
if st[1] == 'done' then return {2, 0, 0, st[4] or ''} end
if owner ~= '' and st[5] == owner .. ' ' .. st[2] then
  redis.call('HSET', KEYS[1], 'until', now + lease)
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl >= 0 and ttl < lease then redis.call('PEXPIRE', KEYS[1], lease) end
  return {0, tonumber(st[2]), 0, ''}
end
local untl = tonumber(st[3])
if untl > now then return {1, 0, 0, tostring(untl - now), st[6] or ''} end
if ARGV[3] ~= '1' or ((st[6] or '') ~= '' and st[6] ~= note) then return {3, 0, 0, '', st[6] or ''} end
local tok = fence()
redis.call('HSET', KEYS[1], 'token', tok, 'until', now + lease)
if note ~= '' then redis.call('HSET', KEYS[1], 'note', note) end
if owner ~= '' then redis.call('HSET', KEYS[1], 'owner', owner .. ' ' .. tok) else redis.call('HDEL', KEYS[1], 'owner') end
if keep > 0 then redis.call('PEXPIRE', KEYS[1], math.max(keep, lease)) end
return {0, tonumber(tok), 1, ''}
`)
	// KEYS: record. ARGV: token, lease ms. Returns 1 when renewed. A
	// record that would expire before the renewed lease ends lives until
	// then.
	renewScript = goredis.NewScript(`
local st = redis.call('HMGET', KEYS[1], 'state', 'token')
if st[1] ~= 'pending' or st[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local lease = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'until', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + lease)
local ttl = redis.call('PTTL', KEYS[1])
if ttl >= 0 and ttl < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return 1
`)
	// KEYS: record. ARGV: token, result, keep ms. Returns 1 when published,
	// or published by this token already (a repeat whose first answer was
	// lost: the outcome keeps the token that published it).
	publishScript = goredis.NewScript(`
local st = redis.call('HMGET', KEYS[1], 'state', 'token')
if st[1] == 'done' and st[2] == ARGV[1] then return 1 end
if st[1] ~= 'pending' or st[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[2], 'token', ARGV[1])
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
`)
	// KEYS: record. ARGV: token.
	releaseScript = goredis.NewScript(`
local st = redis.call('HMGET', KEYS[1], 'state', 'token')
if st[1] ~= 'pending' or st[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)
	// KEYS: record. ARGV: token, keep ms. Ends the claim's lease (until 0,
	// past for every clock) and its owner's match, and keeps the record
	// keep from now; returns 1 then, 0 when token no longer holds it.
	doubtScript = goredis.NewScript(`
local st = redis.call('HMGET', KEYS[1], 'state', 'token')
if st[1] ~= 'pending' or st[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'until', 0)
redis.call('HDEL', KEYS[1], 'owner')
if tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) else redis.call('PERSIST', KEYS[1]) end
return 1
`)
	// KEYS: tat, the interval it counts in. ARGV: interval us, burst, max
	// wait us. Returns {ok, wait us}. A tat kept under another interval is
	// rescaled to this one (runtime.RescaleTAT), one without (written by an
	// older build) is taken to count in this one, and either is kept so with
	// this interval even when the call is refused.
	gcraScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, maxwait = tonumber(ARGV[1]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local was = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local function keep(v)
	local px = math.ceil((v - now) / 1000) + 1
	redis.call('SET', KEYS[1], string.format('%.0f', v), 'PX', px)
	redis.call('SET', KEYS[2], ARGV[1], 'PX', px)
end
if was > 0 and was ~= interval and tat > now then
	tat = now + math.ceil((tat - now) / was * interval)
end
local wait = tat - (tonumber(ARGV[2]) - 1) * interval - now
if wait < 0 then wait = 0 end
if wait > maxwait then
	if was ~= interval then keep(tat) end
	return {0, tostring(wait - maxwait)}
end
keep(tat + interval)
return {1, tostring(wait)}
`)
	// KEYS: ledger, its reservations (a sorted set of ids by the end of
	// their lease, ms). ARGV: tokens, usd, calls ceilings ('' unlimited),
	// ttl ms, the call's estimated tokens and usd ('' for no estimate), the
	// reservation id, its lease ms; then, with KEYS[3], the settlement
	// memory ms. Reservations whose lease has ended are charged their hold
	// first (lapseLua); a settlement remembered under the id is forgotten
	// (a reservation made again under it is live). The live ones count with the charged ledger: their
	// number against calls, their estimates (fields ptok and pusd, each
	// reservation's in field 'r:' .. id) against tokens and usd. Returns
	// {resource refused or '', spent, pending}; a resource the estimate
	// would cross ends in '+'. The charged ledger alone is checked first
	// (p, the places held, 0): a refusal it makes is final, and wins over
	// one for the calls in flight (runtime.CheckBudget). The field pending counts
	// reservations for builds before the leases.
	reserveScript = goredis.NewScript(lapseLua + `
local now = lapse(tonumber(ARGV[9]))
local n = redis.call('ZCARD', KEYS[2])
local h = redis.call('HMGET', KEYS[1], 'in', 'out', 'usd', 'calls', 'ptok', 'pusd')
local tokens = tonumber(h[1] or '0') + tonumber(h[2] or '0')
local usd = tonumber(h[3] or '0')
local calls = tonumber(h[4] or '0')
local ptok, pusd = tonumber(h[5] or '0'), tonumber(h[6] or '0')
for _, p in ipairs({{0, 0, 0}, {ptok, pusd, n}}) do
if ARGV[5] ~= '' and ARGV[1] ~= '' and tokens + p[1] + tonumber(ARGV[5]) > tonumber(ARGV[1]) then return {'tokens+', tostring(tokens), tostring(ptok)} end
if ARGV[6] ~= '' and ARGV[2] ~= '' and tonumber(ARGV[6]) > 0 and usd + p[2] + tonumber(ARGV[6]) > tonumber(ARGV[2]) then return {'usd+', tostring(usd), tostring(pusd)} end
if ARGV[1] ~= '' and tokens >= tonumber(ARGV[1]) then return {'tokens', tostring(tokens), ''} end
if ARGV[2] ~= '' and usd >= tonumber(ARGV[2]) then return {'usd', tostring(usd), ''} end
if ARGV[3] ~= '' and calls + p[3] >= tonumber(ARGV[3]) then return {'calls', tostring(calls), tostring(n)} end
end
local et, eus = '0', '0'
if tonumber(ARGV[5] or '') and tonumber(ARGV[5]) > 0 then et = ARGV[5] end
if tonumber(ARGV[6] or '') and tonumber(ARGV[6]) > 0 then eus = ARGV[6] end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[8]), ARGV[7])
redis.call('ZREM', KEYS[3], ARGV[7])
redis.call('HDEL', KEYS[1], 'l:' .. ARGV[7])
redis.call('HSET', KEYS[1], 'r:' .. ARGV[7], et .. ' ' .. eus)
if et ~= '0' then redis.call('HINCRBY', KEYS[1], 'ptok', et) end
if eus ~= '0' then redis.call('HINCRBYFLOAT', KEYS[1], 'pusd', eus) end
redis.call('HINCRBY', KEYS[1], 'pending', 1)
if tonumber(ARGV[4]) > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
end
return {'', '', ''}
`)
	// KEYS: its reservations. ARGV: reservation id, lease ms. A live
	// reservation's lease is extended to lease from now; returns 1 then, 0
	// when it is settled, forgotten or lapsed (nothing is written).
	renewReservationScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local untl = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not untl or tonumber(untl) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return 1
`)
	// KEYS: ledger, its reservations, its settlements. ARGV: reservation
	// id ('' none), in, out, usd, calls, ttl ms, the settlement memory ms.
	// The lapsed reservations are charged their hold first (lapseLua). A
	// reservation settled already adds nothing; one lapsed adds what the
	// charge exceeds its hold by (runtime.Ledger.Beyond); a live one is
	// dropped with its estimates and the charge added, as is an unknown
	// one's. Each is then remembered as settled.
	settleScript = goredis.NewScript(lapseLua + `
local now = lapse(tonumber(ARGV[7]))
local din, dout, dusd, dcalls = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if ARGV[1] ~= '' then
  local id = ARGV[1]
  if redis.call('ZSCORE', KEYS[3], id) then
    local hold = redis.call('HGET', KEYS[1], 'l:' .. id)
    if not hold then return 0 end
    local sp = string.find(hold, ' ')
    local ht, hu = tonumber(string.sub(hold, 1, sp - 1)), tonumber(string.sub(hold, sp + 1))
    local i, o = math.max(tonumber(din), 0), math.max(tonumber(dout), 0)
    local ci = math.min(i, ht)
    local co = math.min(o, ht - ci)
    din = string.format('%d', i - ci)
    dout = string.format('%d', o - co)
    dusd = string.format('%.17g', math.max(tonumber(dusd) - hu, 0))
    dcalls = string.format('%d', math.max(tonumber(dcalls) - 1, 0))
    redis.call('HDEL', KEYS[1], 'l:' .. id)
  else
    local e = redis.call('HGET', KEYS[1], 'r:' .. id)
    if e then
      local sp = string.find(e, ' ')
      local et, eu = string.sub(e, 1, sp - 1), string.sub(e, sp + 1)
      if et ~= '0' then redis.call('HINCRBY', KEYS[1], 'ptok', '-' .. et) end
      if eu ~= '0' then redis.call('HINCRBYFLOAT', KEYS[1], 'pusd', '-' .. eu) end
      redis.call('HDEL', KEYS[1], 'r:' .. id)
      if tonumber(redis.call('HGET', KEYS[1], 'pending') or '0') > 0 then
        redis.call('HINCRBY', KEYS[1], 'pending', -1)
      end
    end
    redis.call('ZREM', KEYS[2], id)
    if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('HDEL', KEYS[1], 'ptok', 'pusd') end
    redis.call('ZADD', KEYS[3], now + tonumber(ARGV[7]), id)
  end
end
redis.call('HINCRBY', KEYS[1], 'in', din)
redis.call('HINCRBY', KEYS[1], 'out', dout)
redis.call('HINCRBYFLOAT', KEYS[1], 'usd', dusd)
redis.call('HINCRBY', KEYS[1], 'calls', dcalls)
if tonumber(ARGV[6]) > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[6]) end
end
return 1
`)
	// KEYS: ledger, its reservations, its settlements. ARGV: the
	// settlement memory ms. Charges the lapsed reservations their hold
	// (lapseLua) and returns the ledger's in, out, usd and calls.
	ledgerScript = goredis.NewScript(lapseLua + `
lapse(tonumber(ARGV[1]))
return redis.call('HMGET', KEYS[1], 'in', 'out', 'usd', 'calls')
`)
)

// lapseLua defines lapse(memory), which returns the server's time in ms
// after charging each reservation of KEYS[2] (the reservations of the
// ledger KEYS[1]) whose lease has ended its hold (runtime.Hold: one call,
// its estimate's tokens as input and its cost) and remembering it, with
// its hold (field 'l:' .. id of the ledger), in KEYS[3] (the ledger's
// settlements, a sorted set of ids by when they are forgotten) for memory
// ms; it first forgets the settlements whose time has come. At most 256
// of each are handled per call.
const lapseLua = `
local function lapse(memory)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 256)) do
    redis.call('HDEL', KEYS[1], 'l:' .. id)
    redis.call('ZREM', KEYS[3], id)
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 256)) do
    local et, eu = '0', '0'
    local e = redis.call('HGET', KEYS[1], 'r:' .. id)
    if e then
      local sp = string.find(e, ' ')
      et, eu = string.sub(e, 1, sp - 1), string.sub(e, sp + 1)
      if et ~= '0' then redis.call('HINCRBY', KEYS[1], 'ptok', '-' .. et) end
      if eu ~= '0' then redis.call('HINCRBYFLOAT', KEYS[1], 'pusd', '-' .. eu) end
      redis.call('HDEL', KEYS[1], 'r:' .. id)
    end
    redis.call('ZREM', KEYS[2], id)
    redis.call('HINCRBY', KEYS[1], 'calls', 1)
    if et ~= '0' then redis.call('HINCRBY', KEYS[1], 'in', et) end
    if eu ~= '0' then redis.call('HINCRBYFLOAT', KEYS[1], 'usd', eu) end
    if tonumber(redis.call('HGET', KEYS[1], 'pending') or '0') > 0 then
      redis.call('HINCRBY', KEYS[1], 'pending', -1)
    end
    redis.call('HSET', KEYS[1], 'l:' .. id, et .. ' ' .. eu)
    redis.call('ZADD', KEYS[3], now + memory, id)
  end
  if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('HDEL', KEYS[1], 'ptok', 'pusd') end
  return now
end
`

func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// Acquire implements runtime.Leaser in one script call.
func (s *Store) Acquire(ctx context.Context, key string, lease, keep time.Duration, takeover bool) (runtime.LeaseGrant, error) {
	return s.AcquireAs(ctx, key, "", nil, lease, keep, takeover)
}

// AcquireAs implements runtime.Leaser in one script call.
func (s *Store) AcquireAs(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool) (runtime.LeaseGrant, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	tk := "0"
	if takeover {
		tk = "1"
	}
	v, err := acquireScript.Run(ctx, s.c, []string{s.k(key), s.prefix + "fence"}, ms(lease), ms(keep), tk, owner, note).Slice()
	if err != nil {
		return runtime.LeaseGrant{}, fmt.Errorf("redis lease: %w", err)
	}
	if len(v) < 4 || len(v) > 6 {
		return runtime.LeaseGrant{}, fmt.Errorf("redis lease: unexpected reply %v", v)
	}
	status, _ := v[0].(int64)
	token, _ := v[1].(int64)
	doubt, _ := v[2].(int64)
	extra, _ := v[3].(string)
	g := runtime.LeaseGrant{Status: runtime.LeaseStatus(status), Token: token, InDoubt: doubt == 1}
	switch g.Status {
	case runtime.LeaseDone:
		g.Result = []byte(extra)
	case runtime.LeaseHeld:
		n, _ := strconv.ParseInt(extra, 10, 64)
		g.Remaining = time.Duration(n) * time.Millisecond
	}
	if len(v) >= 5 {
		if n, _ := v[4].(string); n != "" {
			g.Note = []byte(n)
		}
	}
	if len(v) == 6 {
		if why, _ := v[5].(string); why != "" {
			g.Unreadable = errors.New(why)
		}
	}
	return g, nil
}

func (s *Store) fenced(ctx context.Context, what string, sc *goredis.Script, key string, args ...any) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	n, err := sc.Run(ctx, s.c, []string{s.k(key)}, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("redis lease %s: %w", what, err)
	}
	return n == 1, nil
}

// Renew implements runtime.Leaser.
func (s *Store) Renew(ctx context.Context, key string, token int64, lease time.Duration) (bool, error) {
	return s.fenced(ctx, "renew", renewScript, key, token, ms(lease))
}

// Publish implements runtime.Leaser.
func (s *Store) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	return s.fenced(ctx, "publish", publishScript, key, token, result, ms(keep))
}

// Release implements runtime.Leaser.
func (s *Store) Release(ctx context.Context, key string, token int64) error {
	_, err := s.fenced(ctx, "release", releaseScript, key, token)
	return err
}

// identityKey is the key, under the prefix, of the store's identity.
const identityKey = "store-identity"

// identityScript returns the value of KEYS[1], setting it to ARGV[1] first
// when it has none, and the server's time (seconds, microseconds).
var identityScript = goredis.NewScript(`
local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
if not v then
  v = ARGV[1]
  redis.call('SET', KEYS[1], v)
end
return {v, t[1], t[2]}
`)

// StoreID implements runtime.SharedLeaser: every process that opens the
// store sees its claims, and they outlive the process that made them. The
// identity is kept under the prefix without an expiry, created by the first
// process to ask; a server flushed (or restarted without persistence, or
// failed over to a replica that never had it), another database or another
// prefix has another one. Only a maxmemory policy that evicts keys without
// an expiry (allkeys-*) could drop it: a new one is then made, and resumed
// calls are in doubt rather than run.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	id, _, err := s.StoreIDAt(ctx)
	return id, err
}

// StoreIDAt implements runtime.StoreClock: the identity (StoreID) and the
// server's time (TIME), the clock its claims expire by, in one script call.
func (s *Store) StoreIDAt(ctx context.Context) (string, time.Time, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	v, err := identityScript.Run(ctx, s.c, []string{s.k(identityKey)}, runtime.NewStoreID()).StringSlice()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("redis store identity: %w", err)
	}
	if len(v) != 3 {
		return "", time.Time{}, fmt.Errorf("redis store identity: unexpected reply %v", v)
	}
	sec, err1 := strconv.ParseInt(v[1], 10, 64)
	usec, err2 := strconv.ParseInt(v[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", time.Time{}, fmt.Errorf("redis store identity: unexpected time %v", v[1:])
	}
	return v[0], time.Unix(sec, usec*1000), nil
}

// Doubt implements runtime.Leaser in one script call.
func (s *Store) Doubt(ctx context.Context, key string, token int64, keep time.Duration) (bool, error) {
	return s.fenced(ctx, "doubt", doubtScript, key, token, ms(keep))
}

// Allow implements runtime.RateLimiter in one script call.
func (s *Store) Allow(ctx context.Context, key string, interval time.Duration, burst int64, maxWait time.Duration) (time.Duration, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	v, err := gcraScript.Run(ctx, s.c, s.rateKeys(key), runtime.IntervalMicros(interval), burst, maxWait.Microseconds()).Slice()
	if err != nil {
		return 0, false, fmt.Errorf("redis rate limit: %w", err)
	}
	if len(v) != 2 {
		return 0, false, fmt.Errorf("redis rate limit: unexpected reply %v", v)
	}
	ok, _ := v[0].(int64)
	ws, _ := v[1].(string)
	us, _ := strconv.ParseInt(ws, 10, 64)
	return time.Duration(us) * time.Microsecond, ok == 1, nil
}

// ForgetRate implements runtime.RateLimiter.
func (s *Store) ForgetRate(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.c.Del(ctx, s.rateKeys(key)...).Err(); err != nil {
		return fmt.Errorf("redis rate limit: %w", err)
	}
	return nil
}

// intervalSuffix ends the key of the interval a bucket's tat counts in.
const intervalSuffix = "#interval"

// rateKeys are the keys of bucket key: its tat, and beside it the
// interval it counts in (under its key followed by intervalSuffix, escaped
// as ledger escapes a ledger's, so no bucket's tat is another's interval).
func (s *Store) rateKeys(key string) []string {
	k := s.escaped(key, intervalSuffix)
	return []string{k, k + intervalSuffix}
}

func limit[T int64 | float64](p *T) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*p), 'g', -1, 64)
}

// reservationsSuffix ends the key of a ledger's reservations, and
// settledSuffix the key of its settlements (the reservations settled or
// lapsed in the last runtime.SettleMemory).
const (
	reservationsSuffix = "#reservations"
	settledSuffix      = "#settled"
)

// ledger is the key of ledger key. A ledger's reservations and
// settlements are kept beside it, under its key followed by
// reservationsSuffix or settledSuffix; so that no ledger's own key ends
// that way (the ledger of a run "x#reservations" would be the
// reservations of run "x"), a key ending in either suffix followed by any
// number of '#' gets one '#' more: no two keys, ledgers, reservations or
// settlements, meet. Every other key is stored where it always was.
func (s *Store) ledger(key string) string { return s.escaped(key, reservationsSuffix, settledSuffix) }

// escaped is the stored key of key, whose state may have keys beside it
// ending in one of suffixes: key with one '#' more when it ends in one of
// them followed by any number of '#'.
func (s *Store) escaped(key string, suffixes ...string) string {
	k := strings.TrimRight(key, "#")
	for _, suf := range suffixes {
		if strings.HasSuffix(k, suf) {
			return s.k(key) + "#"
		}
	}
	return s.k(key)
}

// budgetKeys are the keys of ledger key: the ledger, its reservations and
// its settlements.
func (s *Store) budgetKeys(key string) []string {
	l := s.ledger(key)
	return []string{l, l + reservationsSuffix, l + settledSuffix}
}

// reservations is the key of the reservations of ledger key.
func (s *Store) reservations(key string) string { return s.ledger(key) + reservationsSuffix }

// Reserve implements runtime.Budgeter in one script call.
func (s *Store) Reserve(ctx context.Context, key, id string, lim runtime.BudgetLimits, ttl time.Duration) (*runtime.BudgetError, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	estTokens, estUSD := "", ""
	if est := lim.Estimate; est != nil {
		estTokens, estUSD = strconv.FormatInt(est.Tokens(), 10), strconv.FormatFloat(est.USD, 'f', -1, 64)
	}
	v, err := reserveScript.Run(ctx, s.c, s.budgetKeys(key), limit(lim.Tokens), limit(lim.USD), limit(lim.Calls), ms(ttl),
		estTokens, estUSD, id, ms(lim.LeaseOf()), ms(runtime.SettleMemory)).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redis budget reserve: %w", err)
	}
	if len(v) != 3 || v[0] == "" {
		return nil, nil
	}
	spent, _ := strconv.ParseFloat(v[1], 64)
	pending, _ := strconv.ParseFloat(v[2], 64)
	resource, crossed := strings.CutSuffix(v[0], "+")
	e := &runtime.BudgetError{Resource: resource, Spent: spent, Pending: pending}
	if crossed {
		e.Estimate = lim.EstimateOf(resource)
	}
	switch resource {
	case "tokens":
		e.Limit = float64(*lim.Tokens)
	case "usd":
		e.Limit = *lim.USD
	case "calls":
		e.Limit = float64(*lim.Calls)
	}
	return e, nil
}

// RenewReservation implements runtime.Budgeter in one script call.
func (s *Store) RenewReservation(ctx context.Context, key, id string, lease time.Duration) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	n, err := renewReservationScript.Run(ctx, s.c, []string{s.reservations(key)}, id, ms(lease)).Int64()
	if err != nil {
		return false, fmt.Errorf("redis budget renew: %w", err)
	}
	return n == 1, nil
}

// Settle implements runtime.Budgeter in one script call.
func (s *Store) Settle(ctx context.Context, key, id string, c runtime.Ledger, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	err := settleScript.Run(ctx, s.c, s.budgetKeys(key), id, c.InputTokens, c.OutputTokens,
		strconv.FormatFloat(c.USD, 'f', -1, 64), c.Calls, ms(ttl), ms(runtime.SettleMemory)).Err()
	if err != nil {
		return fmt.Errorf("redis budget settle: %w", err)
	}
	return nil
}

// LedgerOf implements runtime.Budgeter in one script call, which charges
// the lapsed reservations first.
func (s *Store) LedgerOf(ctx context.Context, key string) (runtime.Ledger, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	v, err := ledgerScript.Run(ctx, s.c, s.budgetKeys(key), ms(runtime.SettleMemory)).Slice()
	if err != nil {
		return runtime.Ledger{}, fmt.Errorf("redis ledger: %w", err)
	}
	num := func(x any) string { s, _ := x.(string); return s }
	var l runtime.Ledger
	l.InputTokens, _ = strconv.ParseInt(num(v[0]), 10, 64)
	l.OutputTokens, _ = strconv.ParseInt(num(v[1]), 10, 64)
	l.USD, _ = strconv.ParseFloat(num(v[2]), 64)
	l.Calls, _ = strconv.ParseInt(num(v[3]), 10, 64)
	return l, nil
}

// ForgetLedger implements runtime.Budgeter.
func (s *Store) ForgetLedger(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.c.Del(ctx, s.budgetKeys(key)...).Err(); err != nil {
		return fmt.Errorf("redis delete: %w", err)
	}
	return nil
}

var (
	_ runtime.KV           = (*Store)(nil)
	_ runtime.AuditSink    = (*Store)(nil)
	_ runtime.Leaser       = (*Store)(nil)
	_ runtime.SharedLeaser = (*Store)(nil)
	_ runtime.Evictor      = (*Store)(nil)
	_ runtime.RateLimiter  = (*Store)(nil)
	_ runtime.Budgeter     = (*Store)(nil)
	_ runtime.StoreBackend = (*Store)(nil)
)
