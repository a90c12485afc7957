// Package redis is the Redis state backend of agentc (through
// github.com/redis/go-redis/v9): one Redis server shared by every replica
// of a service holds their idempotency leases, rate limits, budget ledgers,
// caches and audit stream.
//
// Importing the package registers the store kind "redis" with the runtime
// (builtins/all imports it), so a policy selects it by name:
//
//	stores: shared: {kind: "redis", url_env: "REDIS_URL", prefix: "billing"}
//	chains: tool: [{use: "rate_limit", rate: 10, store: "shared"}, {use: "idempotent", store: "shared"}]
//
// The URL ("redis://user:pass@host:6379/0", "rediss://" for TLS) comes from
// the store's url, else from the environment variable its url_env names.
// Every key is namespaced by the store's prefix ("agentc" when unset).
//
// Ports: runtime.KV (GET, SET PX, SET NX PX, DEL); runtime.Leaser, the
// runtime.RateLimiter (GCRA) and the runtime.Budgeter as Lua scripts, each
// one atomic round trip that reads the server's clock (TIME), so replicas
// with skewed clocks agree (a rate bucket keeps the interval its tat
// counts in beside it, under its key followed by "#interval", so a call
// under another interval rescales it); runtime.AuditSink as a stream (XADD to
// <prefix>:audit, one entry per record with its JSON in the field "r").
// Redis offers no vector index: a semantic_memoize layer cannot use a redis
// store (agentc vet reports it).
//
// Durability is the server's: with appendonly yes and appendfsync always an
// acknowledged write survives a server crash; with the defaults a crash may
// lose the last second of writes, including audit records and published
// results. Use a postgres store for an audit trail that must survive.
//
// A server with a maxmemory and a maxmemory-policy other than noeviction
// evicts keys when memory runs short, and forgets them as a flush does.
// Open reads the setting (INFO memory; Store.Eviction, runtime.Evictor):
// an idempotent layer or a meter is refused on such a store when it builds,
// an audit sink under an allkeys-* policy too.
package redis
