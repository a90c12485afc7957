package pii_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/runtime"
)

// TestStreamedLineStaysLinear: a line the layer holds until its line break, streamed a
// few bytes a delta (a model writes a few bytes a token, and whoever writes the prompt
// decides that it writes no line break), costs time proportional to its length: four
// times as many deltas take under eight times as long. The held text was searched for its
// last line break at every delta (10,000 deltas, 400 KB, took over a second). So does a
// line written in tag characters, four bytes each.
func TestStreamedLineStaysLinear(t *testing.T) {
	model := &chunkModel{}
	for _, spell := range []func(string) string{func(s string) string { return s }, textnormtest.Tags} {
		for _, config := range []string{`{"action":"redact"}`, `{"action":"block"}`} {
			pl := chatPipeline(t, config, model)
			run := func(n int) time.Duration {
				model.deltas = []string{spell("Card: 4111 1111 1111 1111 ")}
				for range n {
					model.deltas = append(model.deltas, spell(strings.Repeat("word ", 8)))
				}
				var got strings.Builder
				d := cputime.Of(func() {
					_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
						Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
						func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
					if config == `{"action":"block"}` {
						var b *runtime.BlockedError
						require.ErrorAs(t, err, &b)
					} else {
						require.NoError(t, err)
					}
				})
				assert.NotContains(t, got.String(), spell("4111"))
				return d
			}
			run(500) // warm up
			small, large := run(2500), run(10000)
			assert.Less(t, large, 8*small+100*time.Millisecond, "%s: 2,500 deltas took %v, 10,000 %v", config, small, large)
		}
	}
}

// TestNumericLinesReleasedAsTheyCome: lines each ending in a short number ("row 7:
// 12345", a date) are released as they come and in time proportional to their count. A
// card cannot run on from a line across the digits held at its end, so the lines before
// the last are not held; each cut was checked again back over every such line, which
// held them all to the end and cost the cube of their count (2,000 lines, 21 s).
func TestNumericLinesReleasedAsTheyCome(t *testing.T) {
	model := &chunkModel{}
	pl := chatPipeline(t, `{"action":"redact"}`, model)
	for _, shape := range []string{"row %d: 12345\n", "- release on 2026-12-%02d\n"} {
		run := func(n int) (time.Duration, int) {
			model.deltas = model.deltas[:0]
			for i := range n {
				model.deltas = append(model.deltas, fmt.Sprintf(shape, i%28+1))
			}
			var got strings.Builder
			releases := 0
			d := cputime.Of(func() {
				_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
					Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
					func(d runtime.Delta) bool { got.WriteString(d.Text); releases++; return true })
				require.NoError(t, err)
			})
			assert.Equal(t, strings.Join(model.deltas, ""), got.String(), shape)
			return d, releases
		}
		run(200) // warm up
		small, releases := run(500)
		large, _ := run(2000)
		assert.Greater(t, releases, 250, "%q: lines released as they come, not held to the end", shape)
		assert.Less(t, large, 8*small+100*time.Millisecond, "%q: 500 lines took %v, 2,000 %v", shape, small, large)
	}
}
