package audit_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const digestKey = "audit-test-digest-key-0123456789abcdef"

// withMemory runs test over trailSinks and a memory sink.
func withMemory(t *testing.T, test func(t *testing.T, stores map[string]plan.Store, deps runtime.Deps,
	records func(pl *runtime.Pipeline, run string) []runtime.AuditRecord)) {
	t.Run("memory", func(t *testing.T) {
		sink := &runtime.MemoryAudit{}
		test(t, nil, runtime.Deps{AuditSinks: map[string]runtime.AuditSink{"trail": sink}}, func(_ *runtime.Pipeline, run string) []runtime.AuditRecord {
			var out []runtime.AuditRecord
			for _, r := range sink.Records() {
				if r.RunID == run {
					out = append(out, r)
				}
			}
			return out
		})
	})
	trailSinks(t, test)
}

// TestADigestKeyHidesAPINFromTheTrail: a 4-digit PIN is recovered from a
// plain trail by digesting the 10,000 candidates. With
// settings.digest_key_env, the intent and outcome records, on every sink,
// hold the HMAC of the arguments (and of the withheld error text and the
// turn's input) under the key: none of the candidates' plain digests
// matches the record, its idempotency key is not the plain one, and an
// auditor holding the key matches the record to the call
// (runtime.NewDigester). Without the key set, Build fails naming the
// variable.
func TestADigestKeyHidesAPINFromTheTrail(t *testing.T) {
	const pin = "4821"
	withMemory(t, func(t *testing.T, stores map[string]plan.Store, deps runtime.Deps, records func(*runtime.Pipeline, string) []runtime.AuditRecord) {
		ctx := context.Background()
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", `{"sink": "trail"}`)}, Turn: []plan.Layer{rt.Layer("audit", `{"sink": "trail"}`)}})
		p.Stores = stores
		p.Tools = map[string]plan.Tool{"unlock": {}}
		p.Settings.DigestKeyEnv = "AGENTC_TEST_AUDIT_DIGEST_KEY"
		deps.Tools = map[string]runtime.ToolFunc{"unlock": rt.NewTool(rt.ToolResult{Err: &runtime.CallError{Kind: runtime.KindPermanent,
			Layer: "vault", Message: "pin " + pin + " rejected"}}).Func()}

		t.Setenv("AGENTC_TEST_AUDIT_DIGEST_KEY", "")
		_, err := runtime.Build(ctx, p, deps)
		require.ErrorContains(t, err, "environment variable AGENTC_TEST_AUDIT_DIGEST_KEY is not set")

		t.Setenv("AGENTC_TEST_AUDIT_DIGEST_KEY", digestKey)
		pl, err := runtime.Build(ctx, p, deps)
		require.NoError(t, err)
		run := fmt.Sprintf("audit-digest-key-%d", time.Now().UnixNano())
		rctx := runtime.WithRun(ctx, runtime.Run{ID: run})
		args := map[string]any{"pin": pin}
		_, toolErr := pl.Tool(rctx, runtime.ToolRequest{Name: "unlock", Args: args})
		require.ErrorContains(t, toolErr, pin)
		_, err = pl.Turn(rctx, runtime.TurnRequest{Input: pin}, func(context.Context) (string, error) { return "ok", nil })
		require.NoError(t, err)

		// The plain digests a reader of the trail would try.
		plain := map[string]bool{}
		for i := range 10000 {
			cand := fmt.Sprintf("%04d", i)
			b, _ := json.Marshal(map[string]any{"pin": cand})
			s := sha256.Sum256(b)
			plain[hex.EncodeToString(s[:])] = true
			s = sha256.Sum256([]byte(cand))
			plain[hex.EncodeToString(s[:])] = true
		}
		require.True(t, plain[plainArgs(t, args)], "the search finds a plain digest")
		plainKey := (&runtime.ToolCall{Name: "unlock", Args: args, Meta: runtime.Meta{Run: runtime.Run{ID: run}}}).IdempotencyKey()

		auditor, err := runtime.NewDigester([]byte(digestKey))
		require.NoError(t, err)
		want, err := auditor.Args(args)
		require.NoError(t, err)
		recs := records(pl, run)
		require.Len(t, recs, 4, "intent and outcome of the tool call and of the turn")
		for _, r := range recs {
			b, err := json.Marshal(r)
			require.NoError(t, err)
			assert.NotContains(t, string(b), digestKey)
			assert.NotContains(t, string(b), pin, "the error text is withheld")
			assert.True(t, strings.HasPrefix(r.ArgsDigest, runtime.KeyedDigestPrefix), r.ArgsDigest)
			assert.False(t, plain[strings.TrimPrefix(r.ArgsDigest, runtime.KeyedDigestPrefix)], "no candidate's plain digest matches")
			if r.Stage == plan.StageTool {
				assert.Equal(t, want, r.ArgsDigest, "the auditor matches the record to the call")
				assert.NotEqual(t, plainKey, r.IdempotencyKey, "the idempotency key is not derived from a plain digest")
			} else {
				assert.Equal(t, auditor.Text(pin), r.ArgsDigest)
				h := sha256.Sum256([]byte("turn\x00" + run + "\x00\x00" + pin))
				assert.NotEqual(t, "turn-"+hex.EncodeToString(h[:16]), r.IdempotencyKey, "the turn's key is not derived plainly from its input")
				assert.True(t, strings.HasPrefix(r.IdempotencyKey, "turn-"), r.IdempotencyKey)
			}
			if r.Phase == runtime.PhaseOutcome && r.Stage == plan.StageTool {
				mac := hmac.New(sha256.New, []byte(digestKey))
				mac.Write([]byte(toolErr.Error()))
				assert.Contains(t, r.ErrorMessage, "text withheld, hmac-sha256 "+hex.EncodeToString(mac.Sum(nil)))
			}
		}
	})
}

// plainArgs is the plain digest of args.
func plainArgs(t *testing.T, args map[string]any) string {
	d, err := runtime.Digester{}.Args(args)
	require.NoError(t, err)
	return d
}
