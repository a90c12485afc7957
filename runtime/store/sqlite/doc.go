// Package sqlite is the embedded durable state backend of agentc: a SQLite
// file (through modernc.org/sqlite, a pure-Go port, so services keep a
// cgo-free build) that offers the key-value port (runtime.KV) and the audit
// sink (runtime.AuditSink) of the stateful builtins.
//
// Importing the package registers the store kind "sqlite" with the runtime
// (builtins/all imports it), so a policy selects it by name:
//
//	stores: durable: {kind: "sqlite", path: "state/agent.db"}
//	chains: tool: [{use: "idempotent", store: "durable"}, {use: "audit", sink: "durable"}]
//
// Durability: the database runs in WAL journal mode with synchronous=FULL,
// so every committed write (each Set, SetIfAbsent, Delete and each audit
// Append is its own transaction) is fsynced to the write-ahead log before
// the call returns and survives a process crash or power loss. A busy
// timeout (the store's timeout, five seconds unless it declares one) lets
// several processes share one file. The store
// uses one connection per Store: writes from one process are serialized in
// process, which also avoids SQLITE_BUSY between the process's own
// connections.
//
// A file deleted, renamed or replaced while a store has it open would take
// every later write with it (SQLite goes on writing to the file it holds):
// each write (an audit record, a key, a checkpoint) therefore checks, once
// committed, that the path still names the file the store opened, and
// fails otherwise, saying so. The store then copies its write-ahead log
// into the file it holds (a checkpoint: SQLite does not when it closes a
// file that moved) and closes it, so a file renamed (mv audit.db
// audit.db.1, as logrotate does) holds every write the store acknowledged,
// and every later operation fails the same way. Close checkpoints a file
// that moved likewise. An audit layer on the store runs no call (its
// intent is not written) until the process opens the store again (a
// runtime.StorePool opens it afresh for the next pipeline: Spent). While
// the store is open, the recent writes are in path-wal: a copy of the live
// file is taken with SQLite's backup (sqlite3 FILE ".backup COPY"), not
// by copying path alone.
//
// Keys expire lazily: a read ignores an expired key, SetIfAbsent replaces it
// atomically (one upsert statement), and expired rows are purged every 1024
// writes.
//
// A store of another kind (Redis, PostgreSQL) implements the same ports and
// registers with runtime.RegisterStoreKind; no builtin changes.
package sqlite
