package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestStateChangesDigestKey: settings.digest_key_env keys the records of
// idempotent and the entries of memoize and semantic_memoize. Setting it
// leaves the caches' entries unread (idempotent still reads its records of
// before); removing it or naming another variable leaves the keyed
// records of all three unread, idempotent's of calls that ran included.
// Each is reported as any change that moves state, at the setting.
func TestStateChangesDigestKey(t *testing.T) {
	mk := func(env string) *plan.Plan {
		p := resetPlan(plan.Chains{
			Chat: []plan.Layer{rt.Layer("memoize", `{"store":"shared"}`), rt.Layer("semantic_memoize", `{"threshold":0.9}`)},
			Tool: []plan.Layer{rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`), rt.Layer("log", "")},
		})
		p.Settings.DigestKeyEnv = env
		return p
	}
	type row struct{ use, tool, was, now string }
	rows := func(old, next *plan.Plan) []row {
		var out []row
		for _, c := range runtime.StateChanges(old, next) {
			require.Equal(t, []string{"settings.digest_key_env"}, c.Fields, c.Message())
			out = append(out, row{c.Use, c.Tool, c.Was[0], c.Now[0]})
		}
		return out
	}
	const unset = "unset (plain SHA-256)"
	t.Run("set", func(t *testing.T) {
		assert.Equal(t, []row{
			{"memoize", "", unset, `"DIGEST_KEY"`},
			{"semantic_memoize", "", unset, `"DIGEST_KEY"`},
		}, rows(mk(""), mk("DIGEST_KEY")), "idempotent reads its records of before")
	})
	t.Run("removed", func(t *testing.T) {
		got := rows(mk("DIGEST_KEY"), mk(""))
		assert.Equal(t, []row{
			{"memoize", "", `"DIGEST_KEY"`, unset},
			{"semantic_memoize", "", `"DIGEST_KEY"`, unset},
			{"idempotent", "payout", `"DIGEST_KEY"`, unset},
			{"idempotent", "refund", `"DIGEST_KEY"`, unset},
		}, got)
		cs := runtime.StateChanges(mk("DIGEST_KEY"), mk(""))
		assert.True(t, cs[3].Repeats)
		assert.Contains(t, cs[3].Message(), `settings.digest_key_env "DIGEST_KEY" → unset (plain SHA-256)`)
		assert.Contains(t, cs[3].Message(), "calls of refund made before the change run again if repeated")
	})
	t.Run("another variable", func(t *testing.T) {
		assert.Len(t, rows(mk("DIGEST_KEY"), mk("NEW_DIGEST_KEY")), 4)
	})
	t.Run("the same variable", func(t *testing.T) {
		assert.Empty(t, runtime.StateChanges(mk("DIGEST_KEY"), mk("DIGEST_KEY")))
	})
}
