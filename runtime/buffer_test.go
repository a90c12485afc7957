package runtime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// streamOf returns a handler that delivers deltas the way the layers below a
// buffering layer do (counting each in c.Deltas), then returns err.
func streamOf(err error, deltas ...runtime.Delta) runtime.ChatHandler {
	return func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		for _, d := range deltas {
			if !c.Emit(yield, d) {
				return nil
			}
		}
		return err
	}
}

func TestBuffer(t *testing.T) {
	a := runtime.Delta{Text: "a", Usage: runtime.Usage{InputTokens: 3}}
	b := runtime.Delta{Text: "bc", Usage: runtime.Usage{OutputTokens: 2}}
	boom := errors.New("boom")
	tests := []struct {
		name     string
		next     runtime.ChatHandler
		take     int // deltas the consumer accepts; -1 for all
		wantText string
		wantErr  error
		// after Release
		wantAll     bool
		wantGot     []runtime.Delta
		wantDeltas  int
		wantStopped bool
	}{
		{name: "all released", next: streamOf(nil, a, b), take: -1, wantText: "abc",
			wantAll: true, wantGot: []runtime.Delta{a, b}, wantDeltas: 7},
		{name: "consumer stops", next: streamOf(nil, a, b), take: 1, wantText: "abc",
			wantAll: false, wantGot: []runtime.Delta{a}, wantDeltas: 7, wantStopped: true},
		{name: "empty stream", next: streamOf(nil), take: -1, wantText: "",
			wantAll: true, wantDeltas: 5},
		{name: "failure mid-stream", next: streamOf(boom, a), take: -1, wantText: "a", wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &runtime.ChatCall{Deltas: 5}
			var got []runtime.Delta
			yield := func(d runtime.Delta) bool {
				if tt.take >= 0 && len(got) >= tt.take {
					return false
				}
				got = append(got, d)
				return true
			}
			buf, err := runtime.Buffer(context.Background(), c, tt.next)
			assert.Equal(t, 5, c.Deltas, "nothing got past the buffering layer")
			assert.Empty(t, got, "nothing reaches the consumer while buffering")
			assert.Equal(t, tt.wantText, buf.Text)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Len(t, buf.Held, 1, "what arrived before the failure is returned")
				return
			}
			require.NoError(t, err)

			assert.Equal(t, tt.wantAll, buf.Release(c, yield))
			assert.Equal(t, tt.wantGot, got)
			assert.Equal(t, tt.wantDeltas, c.Deltas, "Release counts what it pushes, as Emit does")
			assert.Equal(t, tt.wantStopped, c.Stopped)
		})
	}
}

func TestBufferedUsage(t *testing.T) {
	buf := runtime.Buffered{Held: []runtime.Delta{
		{Text: "a", Usage: runtime.Usage{InputTokens: 3, OutputTokens: 1}},
		{Text: "b", Usage: runtime.Usage{OutputTokens: 2}},
	}}
	assert.Equal(t, runtime.Usage{InputTokens: 3, OutputTokens: 3}, buf.Usage())
	assert.True(t, runtime.Buffered{}.Usage().IsZero())
}
