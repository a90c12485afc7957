package redis_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// xranges records the XRANGE commands a client sends.
type xranges struct {
	mu   sync.Mutex
	sent [][]any
}

func (h *xranges) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *xranges) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "xrange") {
			h.mu.Lock()
			h.sent = append(h.sent, cmd.Args())
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *xranges) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// Records reads a long audit stream a page at a time (each page one
// XRANGE under its own operation timeout), not in one XRANGE that past
// some size no timeout lets answer: every record of the run comes back,
// in append order, across the pages' bounds.
func TestRecordsReadALongStreamByPages(t *testing.T) {
	s := storetest.Redis(t)
	redis.SetRecordsPage(10, t.Cleanup)
	ctx := context.Background()
	var mine []string
	for i := range 35 {
		run := "other"
		if i%3 == 0 {
			run = "mine"
			mine = append(mine, fmt.Sprint("call ", i))
		}
		require.NoError(t, s.Append(ctx, runtime.AuditRecord{RunID: run, Tool: "lookup", IdempotencyKey: fmt.Sprint("call ", i)}))
	}
	h := &xranges{}
	s.Client().AddHook(h)

	got, err := s.Records(ctx, "mine")
	require.NoError(t, err)
	var keys []string
	for _, r := range got {
		keys = append(keys, r.IdempotencyKey)
	}
	assert.Equal(t, mine, keys)
	all, err := s.Records(ctx, "")
	require.NoError(t, err)
	assert.Len(t, all, 35)

	h.mu.Lock()
	sent := h.sent
	h.mu.Unlock()
	require.Len(t, sent, 8, "four pages of at most 10 entries, for each read")
	for _, args := range sent {
		require.Len(t, args, 6, "XRANGE key from + COUNT n: %v", args)
		assert.EqualValues(t, 10, args[5])
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Records(cctx, "mine")
	assert.ErrorIs(t, err, context.Canceled, "the caller's context bounds the whole read")
}

// A page starts just after the last entry of the page before, whatever
// its sequence number.
func TestNextStreamID(t *testing.T) {
	for id, want := range map[string]string{
		"1700000000000-0":                    "1700000000000-1",
		"1700000000000-41":                   "1700000000000-42",
		"1700000000000-18446744073709551615": "1700000000001-0",
	} {
		got, err := redis.NextStreamID(id)
		require.NoError(t, err)
		assert.Equal(t, want, got, id)
	}
	_, err := redis.NextStreamID("not an id")
	assert.Error(t, err)
}
