// Package postgres is the PostgreSQL state backend of agentc (through
// github.com/jackc/pgx/v5): one database shared by every replica of a
// service holds their idempotency leases, rate limits, budget ledgers,
// caches, vector index and audit trail.
//
// Importing the package registers the store kind "postgres" with the
// runtime (builtins/all imports it):
//
//	stores: shared: {kind: "postgres", url_env: "DATABASE_URL", prefix: "billing"}
//	chains: tool: [{use: "audit", sink: "shared"}, {use: "idempotent", store: "shared"}]
//
// The URL ("postgres://user:pass@host:5432/db") comes from the store's url,
// else from the environment variable its url_env names. The store's tables
// live in the schema named by its prefix ("agentc" when unset); Open
// creates the schema and its tables on first use and migrates older
// versions (the version is kept in <schema>.schema_version; several
// processes opening at once serialise on an advisory lock). Opening a
// schema that needs no migration only reads its version, within the
// store's timeout, taking no lock a reader (a backup) holds up; a
// migration waits for each lock at most 30 s, and logs the sessions it
// waits for after 1 s. Next to the
// version it keeps the oldest version whose code still works on the
// tables (CompatibleSince), and a build opens a newer schema that declares
// its version compatible, so replicas of two builds share one store during
// a rolling upgrade or a rollback.
//
// Ports, each one round trip:
//   - runtime.KV: table kv; SetIfAbsent is one INSERT ... ON CONFLICT that
//     also replaces an expired row.
//   - runtime.Leaser: table lease, a function lease_acquire (one call) and
//     single UPDATE/DELETE statements fenced by the token, which comes from
//     the sequence fence. lease_acquire reads a published result without
//     writing (a replay or a cache hit commits nothing); only a claim
//     locks the row. A trigger keeps a pending claim's expiry at or after
//     the end of its lease. A claim records the owner nonce of the attempt
//     that made it with its token (column owner): lease_acquire_as gives an
//     attempt that asks again, after an answer it never got, its own claim
//     back. Doubt is an UPDATE that ends the claim's lease now, so a build
//     that predates it reads the claim as an expired lease: in doubt. A
//     claim keeps its caller's note (column note, schema version 10):
//     lease_acquire_noted locks a pending claim's row, returns its note
//     and takes a claim in doubt over only for the same note, or, when it
//     has none, for any, which it keeps (version 11).
//   - runtime.Budgeter: table ledger (the charges) and table reservation
//     (one row per call in flight: its estimate and the end of its lease).
//     A reservation is one call of the function budget_reserve, which
//     locks the ledger row, counts the live reservations, checks the
//     ceilings (and the call's estimate when it carries one) and inserts
//     the reservation; a settlement is one call of budget_settle, which
//     deletes the reservation and adds the charge under the same lock. A
//     renewal of a reservation while its call runs is one UPDATE of its
//     row. Table settled remembers, for runtime.SettleMemory, each
//     reservation settled (so a settlement sent again charges once) or
//     lapsed (with its hold, which both functions charge, under the lock,
//     when they find its lease ended).
//   - runtime.RateLimiter: GCRA as one INSERT ... ON CONFLICT DO UPDATE on
//     table rate (the row lock serialises the callers of one key). A row
//     keeps the interval its tat counts in (column interval_us, added by
//     schema version 8; NULL in rows of older builds, taken to count in
//     the interval of the next call), and a call under another interval
//     rescales the tat (runtime.RescaleTAT).
//   - runtime.AuditSink: the append-only table audit (the store never
//     updates or deletes a row), one row per intent and per outcome,
//     indexed by run, by tool and time, and by time. Every append is its own
//     transaction committed with synchronous_commit on: it is on disk
//     before Append returns. Text PostgreSQL refuses (a NUL character,
//     bytes that are not UTF-8, in any field or in the arguments) is
//     written with U+FFFD in its place, so such a call keeps its records;
//     the arguments' digest is still that of the call's own arguments.
//     An append whose connection fails (a restart, a proxy or a network
//     that cut it in the pool, its backend terminated) is made again on another connection within
//     the store's timeout, so a cut connection does not cost a record.
//     Each record carries an id of its own (column record, added by schema
//     version 9, under a unique index): the INSERT sent again adds no row
//     when the first one committed, and waits for the first one's
//     transaction when it is still running on the server, so a record is
//     never written twice.
//   - runtime.VectorIndex: table vectors with the embedding as real[];
//     Query scores by exact scan in SQL (a dot product over unnest), or,
//     when the pgvector extension is installed in the database, with its
//     cosine distance operator on the same column. No approximate index is
//     built: the scan is exact either way.
//
// Expired rows are ignored by every read and deleted every 1,024 writes by a
// purge that runs in the background (Close waits for it), never on a call's
// path.
//
// Times are the server's (now()), so replicas with skewed clocks agree.
//
// A btree index entry holds at most 2,704 bytes, compressed: a key, or an
// audit record's run id or tool name, longer than that is refused with an
// error naming the value, its length and the limit.
package postgres
