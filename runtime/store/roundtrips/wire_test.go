package roundtrips_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
)

// wire counts the round trips of the connections it dialled: a write that
// follows a read (or opens the connection) starts one.
type wire struct{ trips atomic.Int64 }

func (w *wire) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, w: w}, nil
}

type countedConn struct {
	net.Conn
	w       *wire
	sending atomic.Bool
}

func (c *countedConn) Write(b []byte) (int, error) {
	if !c.sending.Swap(true) {
		c.w.trips.Add(1)
	}
	return c.Conn.Write(b)
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.sending.Store(false)
	}
	return n, err
}

// The store kinds whose connections count their round trips: the redis
// and postgres stores, opened over a wire registered under the store's
// prefix.
const (
	countedRedis    = "redis+counted"
	countedPostgres = "postgres+counted"
)

var wires sync.Map // prefix -> *wire

func wireOf(prefix string) *wire {
	w, _ := wires.LoadOrStore(prefix, &wire{})
	return w.(*wire)
}

func init() {
	runtime.RegisterStoreKind(countedRedis, func(ctx context.Context, _ string, s plan.Store) (runtime.StoreBackend, error) {
		opt, err := goredis.ParseURL(s.URL)
		if err != nil {
			return nil, err
		}
		opt.Dialer = wireOf(s.Prefix).dial
		return redis.OpenOptions(ctx, opt, s.Prefix)
	})
	runtime.RegisterStoreKind(countedPostgres, func(ctx context.Context, _ string, s plan.Store) (runtime.StoreBackend, error) {
		cfg, err := pgxpool.ParseConfig(s.URL)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.DialFunc = wireOf(s.Prefix).dial
		// pgxpool pings a connection that sat idle for over a second before
		// handing it out: one more round trip that a busy service does not
		// pay, and that a test descheduled on a loaded machine must not count.
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		return postgres.OpenConfig(ctx, cfg, s.Prefix)
	})
}
