package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestMemoryAuditIsBounded: the in-memory trail keeps the last Max records
// (DefaultMemoryAuditMax for the zero value), in order, and counts those
// it dropped, so that a long-running process does not grow with every
// call.
func TestMemoryAuditIsBounded(t *testing.T) {
	ctx := context.Background()
	m := &runtime.MemoryAudit{Max: 3}
	for i := range 8 {
		require.NoError(t, m.Append(ctx, runtime.AuditRecord{Attempts: i}))
	}
	var got []int
	for _, r := range m.Records() {
		got = append(got, r.Attempts)
	}
	assert.Equal(t, []int{5, 6, 7}, got)
	assert.Equal(t, int64(5), m.Dropped())

	var z runtime.MemoryAudit
	for i := range runtime.DefaultMemoryAuditMax + 10 {
		require.NoError(t, z.Append(ctx, runtime.AuditRecord{Attempts: i}))
	}
	recs := z.Records()
	require.Len(t, recs, runtime.DefaultMemoryAuditMax)
	assert.Equal(t, 10, recs[0].Attempts)
	assert.Equal(t, runtime.DefaultMemoryAuditMax+9, recs[len(recs)-1].Attempts)
	assert.Equal(t, int64(10), z.Dropped())
}
