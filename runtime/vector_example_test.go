package runtime_test

import (
	"context"
	"fmt"

	"github.com/agentc-dev/agentc/runtime"
)

// The local embedder and the in-memory index find a near-duplicate question
// in a partition.
func ExampleMemoryVectorIndex() {
	ctx := context.Background()
	emb := runtime.HashEmbedder{}
	idx := runtime.NewMemoryVectorIndex()
	for id, q := range map[string]string{"refund": "How do I get a refund?", "ship": "When will my parcel ship?"} {
		v, _ := emb.Embed(ctx, q)
		_ = idx.Upsert(ctx, "faq", id, v, []byte(q), 0)
	}
	v, _ := emb.Embed(ctx, "how do i get a REFUND")
	best, _ := idx.Query(ctx, "faq", v, 1)
	fmt.Printf("%s %.2f\n", best[0].ID, best[0].Score)
	// Output: refund 1.00
}
