package idempotent_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// TestADamagedRecordFailsClosedSayingSo: the record of a refund that ran
// is damaged in the store (memory, SQLite: the stores whose records the
// layer decodes itself). Its retry does not run; the error says the
// record is unreadable, not that an execution stopped before recording
// its outcome, and a log line names the store, the key and the decode
// error.
func TestADamagedRecordFailsClosedSayingSo(t *testing.T) {
	stores := map[string]func(t *testing.T) runtime.KV{
		"memory": func(*testing.T) runtime.KV { return runtime.NewMemoryKV() },
		"sqlite": func(t *testing.T) runtime.KV {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			kv := open(t)
			var log rt.LogBuffer
			var calls atomic.Int64
			pl := rt.Build(t, refundPlan(`{"key_args": ["order_id"]}`, false), runtime.Deps{KV: kv, Logger: slog.New(slog.NewTextHandler(&log, nil)),
				Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
			req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o-1", "amount": 1}}
			_, err := pl.Tool(ctx1, req)
			require.NoError(t, err)

			key := idempotent.PlainHashKey("args", "refund", "", `["o-1"]`)
			require.NoError(t, kv.Set(context.Background(), key, []byte(`{"stat`), 0))
			_, err = pl.Tool(ctx1, req)
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt)
			assert.Equal(t, int64(1), calls.Load(), "the refund did not run again")
			assert.Contains(t, err.Error(), "idempotency record is unreadable (unexpected end of JSON input)")
			assert.NotContains(t, err.Error(), "stopped before recording its outcome")
			assert.Contains(t, log.String(), "unreadable")
			assert.Contains(t, log.String(), key)
			assert.Contains(t, log.String(), "unexpected end of JSON input")
			assert.Contains(t, log.String(), "store=default")
		})
	}
}

// TestADamagedRecordOfBeforeFailsClosedSayingSo: with a digest key, a
// refund's record under its key of before (the keyed key_args key of an
// earlier build) is damaged. The refund does not run, on its first call
// or its retry; each error says the record of before is unreadable, not
// that an execution stopped before recording its outcome, and a log line
// names the key and the decode error.
func TestADamagedRecordOfBeforeFailsClosedSayingSo(t *testing.T) {
	kv := runtime.NewMemoryKV()
	var log rt.LogBuffer
	var calls atomic.Int64
	t.Setenv(digestKeyEnv, digestKey)
	pl := rt.Build(t, refundPlan(`{"key_args": ["order_id"]}`, true), runtime.Deps{KV: kv, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
	d, err := runtime.NewDigester([]byte(digestKey))
	require.NoError(t, err)
	old := idempotent.HashKey(d, "args", "refund", "", `["o-1"]`)
	require.NoError(t, kv.Set(context.Background(), old, []byte(`{"stat`), 0))

	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o-1", "amount": 1}}
	for range 2 { // found claiming afresh, then through the claim ended in doubt
		_, err = pl.Tool(ctx1, req)
		var doubt *runtime.InDoubtError
		require.ErrorAs(t, err, &doubt)
		assert.Contains(t, err.Error(), "idempotency record is unreadable (unexpected end of JSON input)")
		assert.NotContains(t, err.Error(), "stopped before recording its outcome")
	}
	assert.Zero(t, calls.Load(), "the refund did not run")
	assert.Contains(t, log.String(), "unreadable")
	assert.Contains(t, log.String(), old)
}
