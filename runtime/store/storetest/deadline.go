package storetest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// VanishingHost dials a store's server until the host goes away (GoAway):
// from then on the connections it made are cut and a new one hangs until
// its caller gives up, as a host that stopped answering leaves a SYN
// unanswered. Dial is a client's dialer (go-redis Options.Dialer, pgconn
// DialFunc).
type VanishingHost struct {
	gone  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

// Dial connects to addr, or hangs until ctx ends once the host is gone.
func (h *VanishingHost) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if h.gone.Load() {
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
	}
	return c, err
}

// GoAway cuts the connections made and makes every new one hang.
func (h *VanishingHost) GoAway() {
	h.gone.Store(true)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
}

// margin is what a bounded operation may take past its store's timeout on
// a loaded machine.
const margin = 200 * time.Millisecond

// BudgeterOnAVanishedHost checks that once h, b's dialer, goes away, each
// reservation fails within timeout, b's store timeout.
func BudgeterOnAVanishedHost(t *testing.T, b runtime.Budgeter, h *VanishingHost, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err := b.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err)
	h.GoAway()
	for i := range 3 {
		start := time.Now()
		_, err = b.Reserve(ctx, "ledger", "r1", lim, 0)
		took := time.Since(start)
		require.Error(t, err, "reserve %d", i)
		assert.Less(t, took, timeout+margin, "reserve %d: bounded by the store's timeout", i)
	}
}

// BudgeterPoolWait checks that a reservation that waits for b's only
// pooled connection (b reaches its server through p with a pool of one),
// then sends its command to a server that stopped answering, fails within
// timeout, b's store timeout: the wait and the command share it.
func BudgeterPoolWait(t *testing.T, b runtime.Budgeter, p *Proxy, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err := b.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err, "the connection is open, the scripts loaded")
	p.Stall()
	first := make(chan error, 1)
	go func() { _, err := b.Reserve(ctx, "ledger", "r1", lim, 0); first <- err }()
	time.Sleep(50 * time.Millisecond) // the first call holds the only connection
	start := time.Now()
	_, err = b.Reserve(ctx, "ledger", "r2", lim, 0)
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+margin, "the wait for the connection and the command: bounded by the store's timeout")
	require.Error(t, <-first)
}
