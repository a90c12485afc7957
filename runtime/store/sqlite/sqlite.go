package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver, registered as "sqlite"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Kind is the store kind this package registers.
const Kind = "sqlite"

func init() {
	runtime.RegisterStoreKind(Kind, func(ctx context.Context, name string, s plan.Store) (runtime.StoreBackend, error) {
		if s.Path == "" {
			return nil, errors.New("a sqlite store needs a path")
		}
		timeout, err := s.OpTimeout()
		if err != nil {
			return nil, err
		}
		return Open(ctx, s.Path, WithTimeout(timeout))
	})
}

// Option adjusts how Open opens a store.
type Option func(*config)

type config struct{ timeout time.Duration }

// WithTimeout bounds how long an operation waits for the file's lock held
// by another process (busy_timeout) by d (a positive duration;
// plan.DefaultStoreTimeout without this option).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// purgeEvery is how many KV writes pass between purges of expired rows.
const purgeEvery = 1024

const schema = `
CREATE TABLE IF NOT EXISTS kv (
	key     TEXT PRIMARY KEY,
	value   BLOB NOT NULL,
	expires INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	time            INTEGER NOT NULL,
	layer           TEXT NOT NULL DEFAULT '',
	stage           TEXT NOT NULL DEFAULT '',
	tool            TEXT NOT NULL DEFAULT '',
	phase           TEXT NOT NULL,
	decision        TEXT NOT NULL DEFAULT '',
	error_type      TEXT NOT NULL DEFAULT '',
	error_message   TEXT NOT NULL DEFAULT '',
	attempts        INTEGER NOT NULL DEFAULT 0,
	run_id          TEXT NOT NULL DEFAULT '',
	idempotency_key TEXT NOT NULL DEFAULT '',
	duration_ns     INTEGER NOT NULL DEFAULT 0,
	args_digest     TEXT NOT NULL DEFAULT '',
	args            TEXT
);
CREATE INDEX IF NOT EXISTS audit_run ON audit (run_id, id);
`

// Store is a SQLite file that offers runtime.KV and runtime.AuditSink. It is
// safe for concurrent use. See the package documentation for durability.
type Store struct {
	db   *sql.DB
	path string
	// file is the file Open opened at path (see intact).
	file   os.FileInfo
	writes atomic.Int64
	now    func() time.Time
	// checkpointTable is set once the checkpoint table exists.
	checkpointTable atomic.Bool
	// retired is set, to the error every operation then returns, once
	// the file was found moved, deleted or replaced (intact) and the store
	// let go of it (retire).
	retired atomic.Pointer[error]
	retire1 sync.Once
}

// Open opens (creating it and its directory when absent) the SQLite file at
// path and prepares its tables. The caller closes the Store.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{timeout: plan.DefaultStoreTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite path %q: a path must not contain '?'", path)
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	dsn := path + "?_pragma=busy_timeout(" + strconv.FormatInt(max(cfg.timeout.Milliseconds(), 1), 10) + ")&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite %s: create tables: %w", path, err)
	}
	file, err := os.Stat(path)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return &Store{db: db, path: path, file: file, now: time.Now}, nil
}

// intact reports an error, after a write, when path no longer names the
// file the store opened: the file was deleted, renamed or replaced while
// open. SQLite goes on writing to the file it holds, so without this check
// every write that followed (an audit record, an idempotency claim) would
// succeed into a file no one will read again. The store then lets go of
// the file (retire): it copies the write-ahead log into the file it holds,
// so a file renamed (mv audit.db audit.db.1, as logrotate does) holds every
// write the store acknowledged and the one that found it moved, and closes
// it; every later operation fails with the same error. A new Store opens
// the file now at path.
func (s *Store) intact() error { return s.Spent() }

// moved returns the error of a path that no longer names the file the
// store opened, or nil.
func (s *Store) moved() error {
	fi, err := os.Stat(s.path)
	if err == nil && os.SameFile(s.file, fi) {
		return nil
	}
	why := "was replaced"
	if errors.Is(err, fs.ErrNotExist) {
		why = "was deleted or renamed"
	} else if err != nil {
		why = "cannot be checked (" + err.Error() + ")"
	}
	return fmt.Errorf("sqlite %s: the file %s while the store had it open; the write went to the old file: reopen the store", s.path, why)
}

// gone returns the error of a retired store, or nil.
func (s *Store) gone() error {
	if e := s.retired.Load(); e != nil {
		return *e
	}
	return nil
}

// retire lets go of a file path no longer names, once: it checkpoints the
// write-ahead log into the file the store holds (SQLite does not when it
// closes a file that moved, and the log, which keeps the name the file
// had, would be read by the next file at path as its own, or reset), then
// closes the database, so the store writes no more into a log a new file
// at path will use. Every later operation fails with err, joined to the
// checkpoint's failure, which retire returns. It holds the store's one
// connection from the checkpoint until the database is closed: a write
// waiting for the connection meanwhile fails, and none commits into the
// log after the checkpoint emptied it.
func (s *Store) retire(err error) error {
	var cerr error
	s.retire1.Do(func() {
		conn, connErr := s.db.Conn(context.Background())
		s.retired.Store(&err)
		if connErr != nil {
			cerr = connErr
		} else {
			cerr = checkpointWAL(conn)
		}
		if cerr != nil {
			cerr = fmt.Errorf("sqlite %s: the writes acknowledged before may be only in %s-wal: %w", s.path, s.path, cerr)
			joined := errors.Join(err, cerr)
			s.retired.Store(&joined)
		}
		_ = s.db.Close() // before the connection goes back: no waiter gets it
		if conn != nil {
			_ = conn.Close()
		}
	})
	return cerr
}

// checkpointWAL copies the whole write-ahead log into the database file
// and empties it.
func checkpointWAL(conn *sql.Conn) error {
	var busy, logFrames, done int
	if err := conn.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint: another connection holds the log (%d of %d frames copied)", done, logFrames)
	}
	return nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database. Every write already returned is in the file
// the store opened, whatever its name now: SQLite copies its write-ahead
// log into the file when it closes it, but not into one that was renamed
// or deleted, which the store checkpoints first (retire). A store retired
// already is closed.
func (s *Store) Close() error {
	if s.gone() != nil {
		return nil
	}
	if moved := s.moved(); moved != nil {
		return s.retire(moved)
	}
	return s.db.Close()
}

func (s *Store) expiry(ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return s.now().Add(ttl).UnixNano()
}

// Get implements runtime.KV.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.gone(); err != nil {
		return nil, false, err
	}
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM kv WHERE key = ? AND (expires = 0 OR expires > ?)`,
		key, s.now().UnixNano()).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("sqlite get: %w", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

// Set implements runtime.KV.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := s.gone(); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO kv (key, value, expires) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires = excluded.expires`,
		key, value, s.expiry(ttl))
	if err != nil {
		return fmt.Errorf("sqlite set: %w", err)
	}
	if err := s.intact(); err != nil {
		return err
	}
	s.wrote(ctx)
	return nil
}

// SetIfAbsent implements runtime.KV. One upsert statement inserts the key or
// replaces an expired one, so concurrent callers (in this process or
// another sharing the file) see exactly one success.
func (s *Store) SetIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := s.gone(); err != nil {
		return false, err
	}
	if value == nil {
		value = []byte{}
	}
	now := s.now().UnixNano()
	res, err := s.db.ExecContext(ctx, `INSERT INTO kv (key, value, expires) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires = excluded.expires
		WHERE kv.expires != 0 AND kv.expires <= ?`,
		key, value, s.expiry(ttl), now)
	if err != nil {
		return false, fmt.Errorf("sqlite set-if-absent: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite set-if-absent: %w", err)
	}
	if err := s.intact(); err != nil {
		return false, err
	}
	s.wrote(ctx)
	return n == 1, nil
}

// Delete implements runtime.KV.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.gone(); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM kv WHERE key = ?`, key); err != nil {
		return fmt.Errorf("sqlite delete: %w", err)
	}
	return s.intact()
}

// wrote counts a write and purges expired keys every purgeEvery writes. A
// failed purge is harmless: expired keys are invisible to reads.
func (s *Store) wrote(ctx context.Context) {
	if s.writes.Add(1)%purgeEvery == 0 {
		_, _ = s.db.ExecContext(ctx, `DELETE FROM kv WHERE expires != 0 AND expires <= ?`, s.now().UnixNano())
	}
}

// Append implements runtime.AuditSink: the record is committed (fsynced)
// before Append returns, to the file at the store's path (intact).
func (s *Store) Append(ctx context.Context, r runtime.AuditRecord) error {
	if err := s.gone(); err != nil {
		return err
	}
	var args any
	if r.Args != nil {
		b, err := json.Marshal(r.Args)
		if err != nil {
			return fmt.Errorf("sqlite audit: encode args: %w", err)
		}
		args = string(b)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO audit (time, layer, stage, tool, phase, decision, error_type,
		error_message, attempts, run_id, idempotency_key, duration_ns, args_digest, args)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Time.UnixNano(), r.Layer, r.Stage, r.Tool, string(r.Phase), string(r.Decision), r.ErrorType,
		r.ErrorMessage, r.Attempts, r.RunID, r.IdempotencyKey, int64(r.Duration), r.ArgsDigest, args)
	if err != nil {
		return fmt.Errorf("sqlite audit append: %w", err)
	}
	return s.intact()
}

// Records returns the audit records in append order; a non-empty runID
// selects one run's.
func (s *Store) Records(ctx context.Context, runID string) ([]runtime.AuditRecord, error) {
	if err := s.gone(); err != nil {
		return nil, err
	}
	q := `SELECT time, layer, stage, tool, phase, decision, error_type, error_message, attempts, run_id,
		idempotency_key, duration_ns, args_digest, args FROM audit`
	var qargs []any
	if runID != "" {
		q += ` WHERE run_id = ?`
		qargs = append(qargs, runID)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id`, qargs...)
	if err != nil {
		return nil, fmt.Errorf("sqlite audit records: %w", err)
	}
	defer rows.Close()
	var out []runtime.AuditRecord
	for rows.Next() {
		var (
			r         runtime.AuditRecord
			t, d      int64
			phase, dc string
			args      sql.NullString
		)
		if err := rows.Scan(&t, &r.Layer, &r.Stage, &r.Tool, &phase, &dc, &r.ErrorType, &r.ErrorMessage,
			&r.Attempts, &r.RunID, &r.IdempotencyKey, &d, &r.ArgsDigest, &args); err != nil {
			return nil, fmt.Errorf("sqlite audit records: %w", err)
		}
		r.Time = time.Unix(0, t)
		r.Duration = time.Duration(d)
		r.Phase, r.Decision = runtime.AuditPhase(phase), runtime.AuditDecision(dc)
		if args.Valid {
			if err := runtime.DecodeArgs([]byte(args.String), &r.Args); err != nil {
				return nil, fmt.Errorf("sqlite audit records: args: %w", err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

var (
	_ runtime.KV           = (*Store)(nil)
	_ runtime.AuditSink    = (*Store)(nil)
	_ runtime.StoreBackend = (*Store)(nil)
)

// Spent implements runtime.SpentStore: the error every operation fails
// with once the file was found moved, deleted or replaced, which it looks
// for (a reload asks before it shares the store: the file may have moved
// since the last write), letting go of the file as a write that found it
// would (intact).
func (s *Store) Spent() error {
	if err := s.gone(); err != nil {
		return err
	}
	if moved := s.moved(); moved != nil {
		_ = s.retire(moved)
		return s.gone()
	}
	return nil
}

var _ runtime.SpentStore = (*Store)(nil)
