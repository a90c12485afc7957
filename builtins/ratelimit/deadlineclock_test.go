package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// skewedClock is a host's clock off the wall clock by offset, whose
// Sleep returns at once, noting how long it was asked to wait.
type skewedClock struct {
	offset time.Duration
	slept  atomic.Int64
}

func (c *skewedClock) Now() time.Time { return time.Now().Add(c.offset) }

func (c *skewedClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept.Add(int64(d))
	return ctx.Err()
}

func (c *skewedClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// In wait mode the most a call may wait was its context's deadline less
// the layer's clock: a host clock behind the wall clock (whose time a
// context's deadline is in) let a call reserve a slot it could not wait
// for, and one ahead refused a call whose wait fitted. The time left is
// now read on the deadline's own clock.
func TestWaitModeMeasuresTheDeadlineOnItsOwnClock(t *testing.T) {
	for _, tc := range []struct {
		name     string
		offset   time.Duration
		deadline time.Duration
		fits     bool
	}{
		{"clock behind, the wait outlasts the deadline", -5 * time.Minute, 30 * time.Second, false},
		{"clock ahead, the wait fits", 5 * time.Minute, 2 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &skewedClock{offset: tc.offset}
			tool := rt.NewTool(rt.ToolResult{Value: 1})
			pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1m","burst":1,"mode":"wait"}`)}}),
				runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}, Clock: clock})
			require.NoError(t, err)
			_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
			require.NoError(t, err, "the burst")

			// The next slot is a minute away.
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
			if tc.fits {
				require.NoError(t, err, "the call waits for its slot")
				assert.InDelta(t, time.Minute.Seconds(), time.Duration(clock.slept.Load()).Seconds(), 5)
				assert.Equal(t, 2, tool.Calls())
				return
			}
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce, "refused at once")
			assert.Equal(t, runtime.KindRateLimited, ce.Kind)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Zero(t, clock.slept.Load(), "no wait begun")
			assert.Equal(t, 1, tool.Calls())
		})
	}
}
