package audit_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

func benchAudit(b *testing.B, p *plan.Plan, deps runtime.Deps) {
	deps.Tools = map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}
	pl := rt.Build(b, p, deps)
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 50}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Tool(ctx1, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolMemory is one audited tool call (intent and outcome) into the
// in-memory sink.
func BenchmarkToolMemory(b *testing.B) {
	benchAudit(b, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: &discard{}})
}

// BenchmarkToolSQLite is one audited tool call into a SQLite file: two
// durable (fsynced) commits.
func BenchmarkToolSQLite(b *testing.B) {
	p := toolPlan(rt.Layer("audit", `{"sink": "disk"}`))
	p.Stores = map[string]plan.Store{"disk": {Kind: "sqlite", Path: filepath.Join(b.TempDir(), "audit.db")}}
	benchAudit(b, p, runtime.Deps{})
}

// BenchmarkAppendSQLite is one record appended to a SQLite file.
func BenchmarkAppendSQLite(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "audit.db"))
	require.NoError(b, err)
	defer s.Close()
	rec := runtime.AuditRecord{Layer: "audit", Stage: "tool", Tool: "refund", Phase: runtime.PhaseOutcome,
		Decision: runtime.DecisionOK, Attempts: 1, RunID: "run-1", ArgsDigest: "abc"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendMemory is one record appended to a MemoryAudit.
func BenchmarkAppendMemory(b *testing.B) {
	s := &runtime.MemoryAudit{}
	rec := runtime.AuditRecord{Layer: "audit", Phase: runtime.PhaseOutcome, Decision: runtime.DecisionOK}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Append(ctx, rec)
	}
}

// discard is a sink that keeps nothing, so that the benchmark measures the
// layer rather than a growing slice.
type discard struct{}

func (*discard) Append(context.Context, runtime.AuditRecord) error { return nil }
