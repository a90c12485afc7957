package audit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// TestIncludeArgsMasksTheRunsSecrets passes the token a secret_result tool
// returned on to another tool, as a model does, under an audit with
// include_args writing to PostgreSQL: the trail holds "[SECRET]" where the
// token was (in a value, inside a list, as a key), never the token, which a
// checkpoint of the same run would refuse to persist; other arguments stay
// as given.
func TestIncludeArgsMasksTheRunsSecrets(t *testing.T) {
	url := os.Getenv("AGENTC_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("AGENTC_TEST_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	store, err := postgres.Open(ctx, url, "audit_secret_test_")
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", `{"include_args": true}`)}})
	p.Tools = map[string]plan.Tool{"vault": {SecretResult: true}, "call_api": {}}
	pl := rt.Build(t, p, runtime.Deps{Audit: store, Tools: map[string]runtime.ToolFunc{
		"vault":    rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_9f8e7d6c", "pin": 48213}}).Func(),
		"call_api": rt.NewTool(rt.ToolResult{Value: "ok"}).Func(),
	}})
	run := fmt.Sprintf("audit-secret-%d", time.Now().UnixNano())
	rctx := runtime.WithRun(ctx, runtime.Run{ID: run})
	_, err = pl.Tool(rctx, runtime.ToolRequest{Name: "vault", Args: map[string]any{}})
	require.NoError(t, err)
	args := map[string]any{"auth": "Bearer tok_9f8e7d6c", "headers": []any{"x-pin: 48213"},
		"tok_9f8e7d6c": true, "code": 48213, "path": "/v1/charges"}
	_, err = pl.Tool(rctx, runtime.ToolRequest{Name: "call_api", Args: args})
	require.NoError(t, err)
	recs, err := store.Records(ctx, run)
	require.NoError(t, err)
	var n int
	for _, r := range recs {
		if r.Tool != "call_api" {
			continue
		}
		n++
		b, _ := json.Marshal(r.Args)
		assert.NotContains(t, string(b), "tok_9f8e7d6c")
		assert.NotContains(t, string(b), "48213")
		assert.Equal(t, map[string]any{"auth": "[SECRET]", "headers": []any{"[SECRET]"}, "[SECRET]": true,
			"code": "[SECRET]", "path": "/v1/charges"}, r.Args)
	}
	assert.Equal(t, 2, n, "intent and outcome")
	assert.Equal(t, "Bearer tok_9f8e7d6c", args["auth"], "the call's own arguments are untouched")
}

// TestTrailMasksSecretsInEveryText writes, through audit layers on the tool
// and turn chains, a tool error that echoes the token a secret_result tool
// returned and a turn whose input quotes it and whose error does too, to a
// SQLite file, to PostgreSQL and to Redis: no record, read back from either, holds
// the token or the PIN anywhere; the error messages keep their text around
// "[SECRET]", the turn's input is "[SECRET]".
func TestTrailMasksSecretsInEveryText(t *testing.T) {
	ctx := context.Background()
	build := func(t *testing.T, stores map[string]plan.Store, deps runtime.Deps) *runtime.Pipeline {
		p := rt.Plan(plan.Chains{})
		p.Stores = stores
		p.Chains.Tool = []plan.Layer{rt.Layer("audit", `{"include_args": true, "include_errors": true, "sink": "trail"}`)}
		p.Chains.Turn = []plan.Layer{rt.Layer("audit", `{"include_args": true, "include_errors": true, "sink": "trail"}`)}
		p.Tools = map[string]plan.Tool{"vault": {SecretResult: true}, "call_api": {}}
		deps.Tools = map[string]runtime.ToolFunc{
			"vault":    rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_9f8e7d6c", "pin": 48213}}).Func(),
			"call_api": rt.NewTool(rt.ToolResult{Err: rt.Permanent(`401: token "tok_9f8e7d6c" (pin 48213) refused`)}).Func(),
		}
		pl, err := runtime.Build(ctx, p, deps)
		require.NoError(t, err)
		return pl
	}
	check := func(t *testing.T, pl *runtime.Pipeline, records func(run string) []runtime.AuditRecord) {
		run := fmt.Sprintf("audit-text-%d", time.Now().UnixNano())
		rctx := runtime.WithRun(ctx, runtime.Run{ID: run})
		_, err := pl.Tool(rctx, runtime.ToolRequest{Name: "vault", Args: map[string]any{}})
		require.NoError(t, err)
		_, err = pl.Tool(rctx, runtime.ToolRequest{Name: "call_api", Args: map[string]any{"auth": "tok_9f8e7d6c"}})
		require.ErrorContains(t, err, "tok_9f8e7d6c", "the caller's own error is untouched")
		_, err = pl.Turn(rctx, runtime.TurnRequest{Input: "use tok_9f8e7d6c again"},
			func(context.Context) (string, error) { return "", rt.Permanent("echo: tok_9f8e7d6c / 48213") })
		require.Error(t, err)
		recs := records(run)
		var msgs []string
		for _, r := range recs {
			b, err := json.Marshal(r)
			require.NoError(t, err)
			assert.NotContains(t, string(b), "tok_9f8e7d6c")
			assert.NotContains(t, string(b), "48213")
			if r.Phase == runtime.PhaseOutcome && r.ErrorMessage != "" {
				msgs = append(msgs, r.ErrorMessage)
			}
			if r.Stage == plan.StageTurn {
				assert.Equal(t, "[SECRET]", r.Args["input"])
			}
		}
		require.Len(t, recs, 6, "intent and outcome of two tool calls and a turn")
		require.Len(t, msgs, 2)
		assert.Contains(t, msgs[0], `401: token "[SECRET]" (pin [SECRET]) refused`)
		assert.Contains(t, msgs[1], "echo: [SECRET] / [SECRET]")
	}

	trailSinks(t, func(t *testing.T, stores map[string]plan.Store, deps runtime.Deps, records func(*runtime.Pipeline, string) []runtime.AuditRecord) {
		pl := build(t, stores, deps)
		check(t, pl, func(run string) []runtime.AuditRecord { return records(pl, run) })
	})
}

// trailSinks runs test against an audit sink named "trail" in a SQLite
// file, in PostgreSQL and in Redis (each skipped without its URL): test
// builds its pipeline with stores and deps and reads a run's records back
// from the sink with records, once, last (it closes a SQLite pipeline).
func trailSinks(t *testing.T, test func(t *testing.T, stores map[string]plan.Store, deps runtime.Deps,
	records func(pl *runtime.Pipeline, run string) []runtime.AuditRecord)) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.db")
		test(t, map[string]plan.Store{"trail": {Kind: "sqlite", Path: path}}, runtime.Deps{}, func(pl *runtime.Pipeline, run string) []runtime.AuditRecord {
			require.NoError(t, pl.Close())
			s, err := sqlite.Open(ctx, path)
			require.NoError(t, err)
			defer s.Close()
			recs, err := s.Records(ctx, run)
			require.NoError(t, err)
			return recs
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("AGENTC_TEST_POSTGRES_URL")
		if url == "" {
			t.Skip("AGENTC_TEST_POSTGRES_URL is not set")
		}
		store, err := postgres.Open(ctx, url, "audit_secret_test_")
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		test(t, nil, runtime.Deps{AuditSinks: map[string]runtime.AuditSink{"trail": store}}, func(pl *runtime.Pipeline, run string) []runtime.AuditRecord {
			t.Cleanup(func() { _ = pl.Close() })
			recs, err := store.Records(ctx, run)
			require.NoError(t, err)
			return recs
		})
	})
	t.Run("redis", func(t *testing.T) {
		url := os.Getenv("AGENTC_TEST_REDIS_URL")
		if url == "" {
			t.Skip("AGENTC_TEST_REDIS_URL is not set")
		}
		store, err := redis.Open(ctx, url, "audit_secret_test:")
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		test(t, nil, runtime.Deps{AuditSinks: map[string]runtime.AuditSink{"trail": store}}, func(pl *runtime.Pipeline, run string) []runtime.AuditRecord {
			t.Cleanup(func() { _ = pl.Close() })
			recs, err := store.Records(ctx, run)
			require.NoError(t, err)
			return recs
		})
	})
}

// TestErrorTextWithheldByDefault: tool and turn errors that quote personal
// data (a card number, an email address) reach a SQLite file, PostgreSQL
// and Redis without it: each outcome holds the error's kind, the layer it
// names and the digest of its text, which matches the caller's error; with
// include_errors the text is kept.
func TestErrorTextWithheldByDefault(t *testing.T) {
	const card, email = "4111111111111111", "ann@example.com"
	for _, include := range []bool{false, true} {
		t.Run(fmt.Sprintf("include_errors=%v", include), func(t *testing.T) {
			trailSinks(t, func(t *testing.T, stores map[string]plan.Store, deps runtime.Deps, records func(*runtime.Pipeline, string) []runtime.AuditRecord) {
				ctx := context.Background()
				config := `{"sink": "trail"}`
				if include {
					config = `{"sink": "trail", "include_errors": true}`
				}
				p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", config)}, Turn: []plan.Layer{rt.Layer("audit", config)}})
				p.Stores = stores
				p.Tools = map[string]plan.Tool{"charge": {}}
				deps.Tools = map[string]runtime.ToolFunc{"charge": rt.NewTool(rt.ToolResult{Err: &runtime.CallError{Kind: runtime.KindPermanent,
					Layer: "bank", Message: "card " + card + " declined"}}).Func()}
				pl, err := runtime.Build(ctx, p, deps)
				require.NoError(t, err)
				run := fmt.Sprintf("audit-pii-%d", time.Now().UnixNano())
				rctx := runtime.WithRun(ctx, runtime.Run{ID: run})
				_, toolErr := pl.Tool(rctx, runtime.ToolRequest{Name: "charge", Args: map[string]any{"card": card}})
				require.ErrorContains(t, toolErr, card, "the caller's own error is untouched")
				_, turnErr := pl.Turn(rctx, runtime.TurnRequest{Input: "hi"},
					func(context.Context) (string, error) { return "", rt.Permanent("no such user " + email) })
				require.Error(t, turnErr)
				var outcomes []runtime.AuditRecord
				for _, r := range records(pl, run) {
					b, err := json.Marshal(r)
					require.NoError(t, err)
					if !include {
						assert.NotContains(t, string(b), card)
						assert.NotContains(t, string(b), email)
					}
					if r.Phase == runtime.PhaseOutcome {
						outcomes = append(outcomes, r)
					}
				}
				require.Len(t, outcomes, 2)
				for i, callErr := range []error{toolErr, turnErr} {
					assert.Equal(t, "permanent", outcomes[i].ErrorType)
					if include {
						assert.Equal(t, callErr.Error(), outcomes[i].ErrorMessage)
						continue
					}
					sum := sha256.Sum256([]byte(callErr.Error()))
					assert.Contains(t, outcomes[i].ErrorMessage, "text withheld, sha256 "+hex.EncodeToString(sum[:]))
				}
				if !include {
					assert.Contains(t, outcomes[0].ErrorMessage, `layer "bank"`)
				}
			})
		})
	}
}
