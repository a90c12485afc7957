package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connPool is the store's connection pool: a pgxpool whose operations wait
// for a connection when the server refuses a new one for its connection
// limit (SQLSTATE 53300 too_many_connections: the role's CONNECTION LIMIT,
// or max_connections). The pool opens a connection whenever it holds fewer
// than its size (pool_max_conns) and none is idle, and pgxpool returns the
// server's refusal to the operation, although the pool's own connections
// are free a few milliseconds later. Here an operation so refused waits
// for the next connection the pool gets back (or for a backoff of
// connWaitMin doubling up to connWaitMax, as the connections may be other
// processes'), then tries again, for as long as its context lets it (each
// operation is bounded by the store's timeout; a wait under a context
// without a deadline by that timeout too). Nothing was sent on a
// connection the server refused, so trying again is safe.
type connPool struct {
	*pgxpool.Pool
	timeout time.Duration
	// freed holds a token once a connection is released to the pool: one
	// waiting operation tries again per release.
	freed chan struct{}
}

// Waits between the attempts of an operation refused a connection.
const (
	connWaitMin = 5 * time.Millisecond
	connWaitMax = 100 * time.Millisecond
)

// newConnPool prepares cfg to tell the pool of its releases (a tracer,
// added to the configuration's own) and returns the pool, to be opened
// with open.
func newConnPool(cfg *pgxpool.Config, timeout time.Duration) *connPool {
	p := &connPool{timeout: timeout, freed: make(chan struct{}, 1)}
	signal := releaseSignal{p}
	if cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = signal
	} else {
		cfg.ConnConfig.Tracer = multitracer.New(cfg.ConnConfig.Tracer, signal)
	}
	return p
}

// releaseSignal tells a connPool each release of a connection.
type releaseSignal struct{ p *connPool }

func (releaseSignal) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (releaseSignal) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceRelease implements pgxpool.ReleaseTracer.
func (r releaseSignal) TraceRelease(*pgxpool.Pool, pgxpool.TraceReleaseData) {
	select {
	case r.p.freed <- struct{}{}:
	default:
	}
}

// tooManyConnections reports whether err is the server's refusal of a
// connection for its connection limit.
func tooManyConnections(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53300"
}

// waitConn runs op, and again while the server refuses it a connection
// for its connection limit, waiting in between for a connection of p to
// be released or a backoff, within ctx (and p's timeout when ctx has no
// deadline).
func waitConn[T any](ctx context.Context, p *connPool, op func() (T, error)) (T, error) {
	v, err := op()
	if !tooManyConnections(err) {
		return v, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	t := time.NewTimer(connWaitMin)
	defer t.Stop()
	for wait := connWaitMin; ; {
		select {
		case <-p.freed:
		case <-t.C:
			wait = min(2*wait, connWaitMax)
		case <-ctx.Done():
			return v, fmt.Errorf("waiting for a pooled connection: %w: %w", ctx.Err(), err)
		}
		t.Reset(wait)
		if v, err = op(); !tooManyConnections(err) {
			return v, err
		}
	}
}

// Acquire is pgxpool.Pool.Acquire, waiting out the connection limit.
func (p *connPool) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	return waitConn(ctx, p, func() (*pgxpool.Conn, error) { return p.Pool.Acquire(ctx) })
}

// Exec is pgxpool.Pool.Exec, waiting out the connection limit.
func (p *connPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return waitConn(ctx, p, func() (pgconn.CommandTag, error) { return p.Pool.Exec(ctx, sql, args...) })
}

// Query is pgxpool.Pool.Query, waiting out the connection limit.
func (p *connPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return waitConn(ctx, p, func() (pgx.Rows, error) { return p.Pool.Query(ctx, sql, args...) })
}

// Begin is pgxpool.Pool.Begin, waiting out the connection limit.
func (p *connPool) Begin(ctx context.Context) (pgx.Tx, error) {
	return waitConn(ctx, p, func() (pgx.Tx, error) { return p.Pool.Begin(ctx) })
}

// QueryRow is pgxpool.Pool.QueryRow, waiting out the connection limit:
// the connection goes back to the pool once the row is scanned.
func (p *connPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.Acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return &connRow{row: c.QueryRow(ctx, sql, args...), c: c}
}

// connRow is a row read on a connection acquired for it alone.
type connRow struct {
	row pgx.Row
	c   *pgxpool.Conn
}

func (r *connRow) Scan(dest ...any) error {
	defer r.c.Release()
	return r.row.Scan(dest...)
}

// errRow is a row whose query could not be sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
