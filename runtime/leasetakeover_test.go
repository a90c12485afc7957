package runtime_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// rivalKV is a KV on which, the first time a caller asks for the takeover
// marker of a claim in doubt, a rival has just asked for it first (rival:
// the rival's takeover, run on the KV beneath).
type rivalKV struct {
	runtime.KV
	rival func()
}

func (k *rivalKV) SetIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if r := k.rival; r != nil && strings.Contains(key, "#takeover#") {
		k.rival = nil
		r()
	}
	return k.KV.SetIfAbsent(ctx, key, value, ttl)
}

// TestALostTakeoverTellsTheClaimsNote: a replica that lost the race to
// take over a claim in doubt was told the claim was held, without its
// note: an idempotent layer binding a supplied key took that for a call of
// its own values, and the caller could not tell whose call held it. It is
// told the note of the claim the rival made, as a caller that finds a
// claim held is, or, when the rival has not written its claim yet, the
// note it takes the claim over with (the claim's: only its own note takes
// over a claim that has one).
func TestALostTakeoverTellsTheClaimsNote(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// held is the note of the claim in doubt; rival, the rival's;
		// mine, the caller's.
		held, rival, mine, want string
		// written: the rival wrote its claim before the caller asked.
		written bool
	}{
		{"a claim without a note, the rival's written", "", `{"key":"rival"}`, `{"key":"late"}`, `{"key":"rival"}`, true},
		{"a noted claim, the rival's written", `{"key":"k"}`, `{"key":"k"}`, `{"key":"k"}`, `{"key":"k"}`, true},
		{"a noted claim, the rival's not written yet", `{"key":"k"}`, `{"key":"k"}`, `{"key":"k"}`, `{"key":"k"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := runtime.NewMemoryKV()
			first := runtime.NewKVLeaser(mem)
			g, err := first.AcquireAs(ctx, "k", "first", []byte(tc.held), time.Hour, time.Hour, false)
			require.NoError(t, err)
			ok, err := first.Doubt(ctx, "k", g.Token, time.Hour)
			require.NoError(t, err)
			require.True(t, ok)

			tok := g.Token
			kv := &rivalKV{KV: mem}
			kv.rival = func() {
				if !tc.written {
					// It won the marker and stopped before its claim.
					won, err := mem.SetIfAbsent(ctx, "k#takeover#"+strconv.FormatInt(tok, 10), nil, time.Hour)
					require.NoError(t, err)
					require.True(t, won)
					return
				}
				g, err := runtime.NewKVLeaser(mem).AcquireAs(ctx, "k", "rival", []byte(tc.rival), time.Hour, time.Hour, true)
				require.NoError(t, err)
				require.Equal(t, runtime.LeaseAcquired, g.Status, "the rival takes the claim over")
			}
			g, err = runtime.NewKVLeaser(kv).AcquireAs(ctx, "k", "late", []byte(tc.mine), time.Hour, time.Hour, true)
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseHeld, g.Status)
			assert.Equal(t, tc.want, string(g.Note), "the note of the claim the rival holds")
			assert.Positive(t, g.Remaining)
		})
	}
}

// TestATakeoverDoesNotOverwriteAPublishedOutcome: the holder of a claim in
// doubt publishes its outcome while a replica takes the claim over,
// between the replica's read of the claim and its write. The replica's
// write overwrote the outcome (lost, its call run again as in doubt). A
// published outcome wins: the replica is answered from it; else the
// holder is told that its publish did not take (fenced out).
func TestATakeoverDoesNotOverwriteAPublishedOutcome(t *testing.T) {
	ctx := context.Background()
	mem := runtime.NewMemoryKV()
	holder := runtime.NewKVLeaser(mem)
	g, err := holder.AcquireAs(ctx, "k", "first", nil, time.Hour, time.Hour, false)
	require.NoError(t, err)
	ok, err := holder.Doubt(ctx, "k", g.Token, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	var published bool
	kv := &rivalKV{KV: mem, rival: func() {
		published, err = holder.Publish(ctx, "k", g.Token, []byte(`{"v":1}`), time.Hour)
		require.NoError(t, err)
	}}
	late, err := runtime.NewKVLeaser(kv).AcquireAs(ctx, "k", "second", nil, time.Hour, time.Hour, true)
	require.NoError(t, err)
	if published {
		assert.Equal(t, runtime.LeaseDone, late.Status, "the published outcome answers the takeover")
		assert.JSONEq(t, `{"v":1}`, string(late.Result))
	} else {
		assert.Equal(t, runtime.LeaseAcquired, late.Status)
		assert.True(t, late.InDoubt)
	}
	again, err := runtime.NewKVLeaser(mem).AcquireAs(ctx, "k", "third", nil, time.Hour, time.Hour, false)
	require.NoError(t, err)
	if published {
		assert.Equal(t, runtime.LeaseDone, again.Status, "the outcome is kept")
	}
}
