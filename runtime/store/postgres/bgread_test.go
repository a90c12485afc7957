package postgres_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// slowWriteConn is a connection whose writes, while held, return only
// once the server's answer has been read behind them and a read is under
// way again, as on a loaded machine where a write takes longer than the
// driver waits (15 ms) before it reads in the background: the driver's
// background reader reads the answer and goes on reading, and the
// connection goes back to the pool with that read in progress.
type slowWriteConn struct {
	net.Conn
	held atomic.Bool
	// reading counts the reads in progress.
	reading atomic.Int32

	mu sync.Mutex
	// phase of the write being held: 1 written, 2 its answer read,
	// 3 a read begun after that (the write returns).
	phase int
	again chan struct{}
	// missed is set when a held write gave up waiting.
	missed atomic.Bool
}

// NetConn returns the TCP connection, which the pool peeks at.
func (c *slowWriteConn) NetConn() net.Conn { return c.Conn }

func (c *slowWriteConn) Write(b []byte) (int, error) {
	if !c.held.Load() {
		return c.Conn.Write(b)
	}
	again := make(chan struct{})
	c.mu.Lock()
	c.phase, c.again = 1, again
	c.mu.Unlock()
	n, err := c.Conn.Write(b)
	if err != nil {
		return n, err
	}
	select {
	case <-again:
	case <-time.After(5 * time.Second):
		c.missed.Store(true)
	}
	return n, err
}

func (c *slowWriteConn) Read(b []byte) (int, error) {
	c.reading.Add(1)
	defer c.reading.Add(-1)
	c.mu.Lock()
	if c.phase == 2 {
		c.phase = 3
		close(c.again)
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	if c.phase == 1 && n > 0 {
		c.phase = 2
	}
	c.mu.Unlock()
	return n, err
}

// A pooled connection the driver left with a read in progress (its
// background reader, started for a write slower than 15 ms, reads on
// after the answer) is handed out again: the check for an ended idle
// connection waited for that read, which no message ever ends, and the
// operation hung past its timeout, with any process that used it.
func TestAConnectionLeftReadingInTheBackgroundIsHandedOut(t *testing.T) {
	const timeout = 2 * time.Second
	cfg, err := pgxpool.ParseConfig(storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	cfg.MaxConns = 1
	var conn *slowWriteConn
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn = &slowWriteConn{Conn: c}
		return conn, nil
	}
	s, err := postgres.OpenConfig(context.Background(), cfg, storetest.Prefix(t), postgres.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, _ = s.Pool().Exec(ctx, "DROP SCHEMA "+s.Schema()+" CASCADE")
		_ = s.Close()
	})
	ctx := context.Background()
	require.NoError(t, s.Set(ctx, "k", []byte("v"), 0))

	conn.held.Store(true)
	_, ok, err := s.Get(ctx, "k")
	conn.held.Store(false)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, conn.missed.Load(), "the driver read the answer in the background")
	require.Equal(t, int32(1), conn.reading.Load(), "the idle connection has a read in progress")

	done := make(chan error, 1)
	go func() {
		_, _, err := s.Get(ctx, "k")
		done <- err
	}()
	select {
	case err := <-done:
		assert.NoError(t, err, "the connection is in order")
	case <-time.After(4 * timeout):
		t.Fatalf("the next operation did not return within four times the store's timeout (%s)", timeout)
	}
}
