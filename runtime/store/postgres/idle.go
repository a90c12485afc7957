package postgres

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// checkIdle makes the pool hand out no connection the server or the
// network has ended while it sat idle (a backend terminated, a server
// restarted, a proxy that cut it): such a connection has the server's
// last message or its end waiting to be read (idleEnded), and is dropped
// before a statement is sent on it, for another. Sent on it, the
// statement fails once although it never reached the server, and a
// reservation, a rate limit's decision or any other write cannot tell
// that failure from one whose statement ran, and so cannot be sent again.
// A hook the configuration sets (PrepareConn, or the older BeforeAcquire)
// still runs after the check.
//
// The driver may have left a read in progress on the idle connection: a
// write slower than 15 ms (a loaded machine) starts a background reader,
// which reads the answer and goes on reading until the next message. The
// peek would wait for that read, and no message comes to an idle session:
// the operation, whatever its timeout, would never return. So the
// connection is first brought to rest (pgconn.PgConn.SyncConn, bounded by
// the operation's context: a ping when a read is in progress or read data
// is buffered, nothing otherwise); one whose ping fails is dropped.
func checkIdle(cfg *pgxpool.Config) {
	next := cfg.PrepareConn
	if next == nil && cfg.BeforeAcquire != nil {
		before := cfg.BeforeAcquire
		next = func(ctx context.Context, c *pgx.Conn) (bool, error) { return before(ctx, c), nil }
	}
	cfg.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
		if err := c.PgConn().SyncConn(ctx); err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, nil
		}
		if idleEnded(c.PgConn().Conn()) {
			return false, nil
		}
		if next == nil {
			return true, nil
		}
		return next(ctx, c)
	}
}

// transport returns the connection under conn's wrappers (a TLS
// connection's), at most a few deep.
func transport(conn net.Conn) net.Conn {
	for range 4 {
		w, ok := conn.(interface{ NetConn() net.Conn })
		if !ok || w.NetConn() == nil {
			break
		}
		conn = w.NetConn()
	}
	return conn
}
