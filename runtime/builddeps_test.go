package runtime_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A port set to a typed nil (a nil *MemoryStore as Deps.KV, a nil
// *VirtualClock as Deps.Clock) fails Build, naming the field and the type:
// Build took it for a store or a clock, and the first call that used it
// panicked.
func TestBuildRefusesTypedNilPorts(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("idempotent", `{}`)}})
	var (
		store *runtime.MemoryStore
		clock *runtime.VirtualClock
		sink  *runtime.MemoryAudit
		index *runtime.MemoryVectorIndex
		emb   *runtime.HashEmbedder
		cps   *runtime.MemoryCheckpoints
		tp    *sdktrace.TracerProvider
		model *rt.Model
	)
	for name, deps := range map[string]runtime.Deps{
		"Deps.KV is a nil *runtime.MemoryStore":                    {KV: store},
		"Deps.Clock is a nil *runtime.VirtualClock":                {Clock: clock},
		"Deps.Audit is a nil *runtime.MemoryAudit":                 {Audit: sink},
		`Deps.AuditSinks["trail"] is a nil *runtime.MemoryAudit`:   {AuditSinks: map[string]runtime.AuditSink{"trail": sink}},
		`Deps.Stores["shared"] is a nil *runtime.MemoryStore`:      {Stores: map[string]runtime.KV{"shared": store}},
		"Deps.Index is a nil *runtime.MemoryVectorIndex":           {Index: index},
		`Deps.Indexes["docs"] is a nil *runtime.MemoryVectorIndex`: {Indexes: map[string]runtime.VectorIndex{"docs": index}},
		"Deps.Embedder is a nil *runtime.HashEmbedder":             {Embedder: emb},
		"Deps.TracerProvider is a nil *trace.TracerProvider":       {TracerProvider: tp},
		"Deps.Checkpoints is a nil *runtime.MemoryCheckpoints":     {Checkpoints: cps},
		`Deps.Backends["mem"] is a nil *runtime.MemoryStore`:       {Backends: map[string]runtime.StoreBackend{"mem": store}},
		`Deps.Models["primary"] is nil`:                            {Models: map[string]runtime.ModelClient{"primary": model}},
	} {
		var pl *runtime.Pipeline
		var err error
		require.NotPanics(t, func() { pl, err = runtime.Build(context.Background(), p, deps) }, name)
		require.Error(t, err, name)
		assert.Nil(t, pl, name)
		assert.Contains(t, err.Error(), name)
	}

	// A nil *net.Resolver is the system's resolver (package net says so):
	// it is no typed nil to refuse.
	var res *net.Resolver
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Resolver: res})
	require.NoError(t, err)
	require.NoError(t, pl.Close())
}
