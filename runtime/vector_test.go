package runtime_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

func embed(t testing.TB, text string) []float32 {
	t.Helper()
	v, err := runtime.HashEmbedder{}.Embed(context.Background(), text)
	require.NoError(t, err)
	return v
}

func TestHashEmbedder(t *testing.T) {
	a := embed(t, "What is the refund policy for lost parcels?")
	assert.Len(t, a, runtime.DefaultEmbedDims)
	assert.Equal(t, a, embed(t, "What is the refund policy for lost parcels?"), "deterministic")
	assert.InDelta(t, 1.0, runtime.Cosine(a, a), 1e-6, "unit length")
	assert.InDelta(t, 1.0, runtime.Cosine(a, embed(t, "what is the REFUND policy, for lost parcels")), 1e-6,
		"case and punctuation are folded")
	near := runtime.Cosine(a, embed(t, "What is the refund policy for lost parcel?"))
	far := runtime.Cosine(a, embed(t, "Translate this poem into French"))
	assert.Greater(t, near, 0.9)
	assert.Less(t, far, 0.5)
	assert.Equal(t, 0.0, runtime.Cosine(embed(t, ""), a), "empty text matches nothing")
	small, err := runtime.HashEmbedder{Dims: 16}.Embed(context.Background(), "abc")
	require.NoError(t, err)
	assert.Len(t, small, 16)
}

func TestMemoryVectorIndex(t *testing.T) {
	ctx := context.Background()
	idx := runtime.NewMemoryVectorIndex()
	require.NoError(t, idx.Upsert(ctx, "s", "a", embed(t, "refund my order please"), []byte("A"), 0))
	require.NoError(t, idx.Upsert(ctx, "s", "b", embed(t, "what is the weather in Paris"), []byte("B"), 0))
	require.NoError(t, idx.Upsert(ctx, "other", "c", embed(t, "refund my order please"), []byte("C"), 0))

	got, err := idx.Query(ctx, "s", embed(t, "refund my order, please!"), 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].ID)
	assert.Equal(t, []byte("A"), got[0].Value)
	assert.InDelta(t, 1.0, got[0].Score, 1e-6)
	assert.Greater(t, got[0].Score, got[1].Score, "best first")

	got, err = idx.Query(ctx, "empty", embed(t, "x"), 1)
	require.NoError(t, err)
	assert.Empty(t, got)

	require.NoError(t, idx.Upsert(ctx, "s", "a", embed(t, "refund my order please"), []byte("A2"), 0))
	assert.Equal(t, 2, idx.Len("s"), "upsert replaces by id")
	got, err = idx.Query(ctx, "s", embed(t, "refund my order please"), 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, []byte("A2"), got[0].Value)

	assert.Error(t, idx.Upsert(ctx, "s", "z", nil, nil, 0))
}

func TestMemoryVectorIndexTTLAndBound(t *testing.T) {
	ctx := context.Background()
	idx := runtime.NewMemoryVectorIndex()
	idx.MaxEntries = 3
	require.NoError(t, idx.Upsert(ctx, "s", "short", embed(t, "short lived"), nil, 20*time.Millisecond))
	assert.Equal(t, 1, idx.Len("s"))
	time.Sleep(30 * time.Millisecond)
	assert.Equal(t, 0, idx.Len("s"))
	got, err := idx.Query(ctx, "s", embed(t, "short lived"), 1)
	require.NoError(t, err)
	assert.Empty(t, got, "expired entries are not returned")

	for i := range 5 {
		require.NoError(t, idx.Upsert(ctx, "s", fmt.Sprint(i), embed(t, fmt.Sprint("entry ", i)), nil, 0))
	}
	assert.Equal(t, 3, idx.Len("s"), "bounded")
	got, err = idx.Query(ctx, "s", embed(t, "entry 0"), 3)
	require.NoError(t, err)
	for _, m := range got {
		assert.NotEqual(t, "0", m.ID, "the oldest was evicted")
	}
}

// TestMemoryVectorIndexOddVectors: a vector that is not finite is refused,
// and one whose components are huge scores its cosine, within [-1, 1],
// rather than an overflowed +Inf that would match any query.
func TestMemoryVectorIndexOddVectors(t *testing.T) {
	ctx := context.Background()
	idx := runtime.NewMemoryVectorIndex()
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	require.Error(t, idx.Upsert(ctx, "p", "nan", []float32{nan, 1}, nil, 0))
	require.Error(t, idx.Upsert(ctx, "p", "inf", []float32{inf, 1}, nil, 0))
	require.NoError(t, idx.Upsert(ctx, "p", "huge", []float32{3e38, 3e38, 0, 0}, []byte("poison"), 0))
	require.NoError(t, idx.Upsert(ctx, "p", "near", []float32{0.9, 1, 0, 0.1}, []byte("ok"), 0))

	got, err := idx.Query(ctx, "p", []float32{1, 1, 0, 0}, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for _, m := range got {
		assert.LessOrEqual(t, m.Score, 1.0, m.ID)
		assert.GreaterOrEqual(t, m.Score, -1.0, m.ID)
	}
	got, err = idx.Query(ctx, "p", []float32{0, 0, 1, 0.01}, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "near", got[0].ID, "the huge vector is orthogonal to the query: it does not match")

	_, err = idx.Query(ctx, "p", []float32{nan, 1, 0, 0}, 1)
	require.Error(t, err)
}
