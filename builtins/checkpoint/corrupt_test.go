package checkpoint_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestResumeRefusesABadCheckpoint writes, as the run's latest version, a
// row that is not what this build saves (JSON cut short, a property of a
// later build, a status it does not know, a status column that disagrees
// with the data, another run's data, a transcript of the wrong type):
// Resume fails naming the run and the version, nothing of the run is
// restored, and ResumeAll stops on it rather than skipping it.
func TestResumeRefusesABadCheckpoint(t *testing.T) {
	type writer func(t *testing.T, status, data string)
	stores := map[string]func(t *testing.T) (runtime.CheckpointStore, writer){
		"sqlite": func(t *testing.T) (runtime.CheckpointStore, writer) {
			path := filepath.Join(t.TempDir(), "runs.db")
			s, err := sqlite.Open(context.Background(), path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			db, err := sql.Open("sqlite", path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			return s, func(t *testing.T, status, data string) {
				_, err := db.Exec(`INSERT INTO checkpoints (run_id, version, time, status, data) VALUES ('r', 2, ?, ?, ?)`,
					time.Now().UnixNano(), status, data)
				require.NoError(t, err)
			}
		},
		"postgres": func(t *testing.T) (runtime.CheckpointStore, writer) {
			s := storetest.Postgres(t)
			return s, func(t *testing.T, status, data string) {
				_, err := s.Pool().Exec(context.Background(), `INSERT INTO `+s.Schema()+`.checkpoints (run_id, version, time, status, data)
					VALUES ('r', 2, now(), $1, $2)`, status, data)
				require.NoError(t, err)
			}
		},
	}
	cases := []struct {
		name, status, data, err string
	}{
		{"not JSON", "running", `{"run_id":"r","status":"running","transcript":[`, "decode checkpoint version 2"},
		{"property of a later build", "running", `{"run_id":"r","status":"running","approvals":[{"by":"ops"}]}`, `unknown field "approvals"`},
		{"unknown status", "paused", `{"run_id":"r","status":"paused"}`, `version 2 has status "paused"`},
		{"status column disagrees", "done", `{"run_id":"r","status":"running"}`, `checkpoint version 2 of run r is corrupt: its status is "done", its data's "running"`},
		{"another run's data", "running", `{"run_id":"q","status":"running"}`, `version 2 is of run "q"`},
		{"transcript of the wrong type", "running", `{"run_id":"r","status":"running","transcript":"hello"}`, "decode checkpoint version 2"},
		{"two documents", "running", `{"run_id":"r","status":"running"}{}`, "decode checkpoint version 2"},
	}
	for sname, open := range stores {
		for _, tc := range cases {
			t.Run(sname+"/"+tc.name, func(t *testing.T) {
				store, write := open(t)
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
				pl := rt.Build(t, agentPlan(), runtime.Deps{Checkpoints: store})
				c, err := pl.Checkpointer("")
				require.NoError(t, err)
				pl.RecordTranscript(ctx, []runtime.Message{{Role: "user", Content: "hello"}})
				_, err = c.Save(ctx)
				require.NoError(t, err)
				write(t, tc.status, tc.data)

				other := rt.Build(t, agentPlan(), runtime.Deps{Checkpoints: store})
				oc, err := other.Checkpointer("")
				require.NoError(t, err)
				_, err = oc.Resume(ctx, "r")
				require.Error(t, err)
				assert.ErrorContains(t, err, tc.err)
				assert.ErrorContains(t, err, "run r")
				assert.Empty(t, other.Transcript(ctx), "nothing of the run is restored")
				resumed, skipped, err := oc.ResumeAll(ctx, []string{"r"})
				require.Error(t, err, "a bad checkpoint is not skipped as a run that ended")
				assert.Empty(t, resumed)
				assert.Empty(t, skipped)
			})
		}
	}
}
