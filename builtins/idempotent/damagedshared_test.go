package idempotent_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A call whose claim is damaged in a Redis or PostgreSQL store (a state no
// build writes) is in doubt, its error saying the record is unreadable and
// the tool not retry_safe: true only of a tool that is not. A retry_safe
// tool's claim is taken over (the store replaces the damaged record), and
// the call runs under the same key, never meeting that error.
func TestADamagedSharedClaimSaysUnreadableOnlyOfAToolNotRetrySafe(t *testing.T) {
	for _, st := range storetest.SharedStores(t) {
		var damage func(t *testing.T, key string)
		switch s := st.KV.(type) {
		case *redis.Store:
			damage = func(t *testing.T, key string) {
				require.NoError(t, s.Client().HSet(context.Background(), s.Prefix()+key, "state", "finished", "token", "7").Err())
			}
		case *postgres.Store:
			damage = func(t *testing.T, key string) {
				_, err := s.Pool().Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s.lease (key, state, token, until) VALUES ($1, 'finished', 7, clock_timestamp() - interval '1 hour')`,
					pgx.Identifier{s.Schema()}.Sanitize()), key)
				require.NoError(t, err)
			}
		default:
			continue // a store whose records the layer decodes: TestADamagedRecordFailsClosedSayingSo
		}
		for _, retrySafe := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/retry_safe=%v", st.Name, retrySafe), func(t *testing.T) {
				p := toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"]}`))
				p.Tools["refund"] = plan.Tool{SideEffecting: true, RetrySafe: retrySafe}
				var calls atomic.Int64
				pl := rt.Build(t, p, runtime.Deps{KV: st.KV, Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
				order := fmt.Sprintf("%s-%v", t.Name(), retrySafe)
				damage(t, idempotent.PlainHashKey("args", "refund", "", `["`+order+`"]`))

				_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": order, "amount": 1}})
				if retrySafe {
					require.NoError(t, err)
					assert.Equal(t, int64(1), calls.Load(), "taken over and run under the same key")
					return
				}
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt)
				assert.Zero(t, calls.Load(), "not run as if the key were free")
				assert.Error(t, doubt.Unreadable)
				assert.Contains(t, err.Error(), "idempotency record is unreadable")
			})
		}
	}
}
