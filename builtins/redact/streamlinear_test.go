package redact

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestStreamedHoldStaysLinear: output the layer holds back, streamed a piece a delta (a
// model writes a few bytes a token, and whoever writes the prompt decides what it writes),
// costs time proportional to its length: four times as many deltas take under eight times
// as long. Text without a line break was searched for its last line break at every delta,
// and a private key's block left open ("-----BEGIN", then lines that never end it) for its
// opening and closing lines: 20,000 lines of an open block took eleven seconds. A match
// left open (a value awaited after "password:", a configured pattern's lazy repetition)
// is read again at each line while it is held, and holds the rest of the stream once it
// runs over maxOpenLines.
func TestStreamedHoldStaysLinear(t *testing.T) {
	for name, shape := range map[string]struct {
		config string
		deltas func(n int) []string
	}{
		"text without a line break": {"", func(n int) []string {
			return repeated(n, "", strings.Repeat("word ", 8))
		}},
		"text in tag characters without a line break": {"", func(n int) []string {
			return repeated(n, textnormtest.Tags("key "), textnormtest.Tags(strings.Repeat("word ", 8)))
		}},
		"a value awaited in tag characters over blank lines": {"", func(n int) []string {
			return repeated(n, textnormtest.Tags("password:")+"\n", textnormtest.Tags(" ")+"\n")
		}},
		"a private key's block left open": {"", func(n int) []string {
			return repeated(n, "-----BEGIN PRIVATE KEY-----\n", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo\n")
		}},
		"a private key's block after text": {"", func(n int) []string {
			return repeated(n, "Here it is:\n-----BEGIN PRIVATE KEY-----\n", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo\n")
		}},
		"a value awaited over blank lines": {"", func(n int) []string {
			return repeated(n, "password:\n", " \n")
		}},
		"a lazy match left open": {`{"defaults": false, "patterns": ["(?s)BEGIN.*?END"]}`, func(n int) []string {
			return repeated(n, "BEGIN\n", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo\n")
		}},
		// Many short matches left open one after another, each under the
		// cap, the whole run over it: the cap counts from the end of the
		// text, not from each step back.
		"short values awaited line after line": {"", func(n int) []string {
			return repeated(n, "", "password:\n")
		}},
		"short pattern matches open line after line": {`{"defaults": false, "patterns": ["acct:\\s*[0-9]{4}"]}`, func(n int) []string {
			return repeated(n, "", "acct: 1234 acct:\n")
		}},
		"lazy matches opened line after line": {`{"defaults": false, "patterns": ["(?s)BEGIN.*?END"]}`, func(n int) []string {
			return repeated(n, "", "END BEGIN\n")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			run := func(n int) time.Duration {
				deltas := shape.deltas(n)
				model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
					for _, d := range deltas {
						if !yield(runtime.Delta{Text: d}) {
							break
						}
					}
					return nil
				})
				pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", shape.config)}}),
					runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
				var got strings.Builder
				d := cputime.Of(func() {
					_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
						got.WriteString(d.Text)
						return true
					})
					require.NoError(t, err)
				})
				if strings.Contains(deltas[0], "PRIVATE KEY") {
					assert.NotContains(t, got.String(), "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", "the block is masked")
				}
				return d
			}
			run(500) // warm up
			small, large := run(2500), run(10000)
			assert.Less(t, large, 8*small+100*time.Millisecond, "2,500 deltas took %v, 10,000 %v", small, large)
		})
	}
}

// repeated returns first, then n deltas of piece.
func repeated(n int, first, piece string) []string {
	out := []string{first}
	for range n {
		out = append(out, piece)
	}
	return out
}

// TestStreamedKeyBlocksCutAnywhere: private keys' blocks streamed in pieces of every size
// from one byte (their BEGIN and END lines cut anywhere), two in a row with text between,
// are each held until they end and masked, and the text after a block ends goes out
// before the stream ends.
func TestStreamedKeyBlocksCutAnywhere(t *testing.T) {
	block := func(body string) string {
		return "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n" + body + "\n-----END RSA PRIVATE KEY-----\n"
	}
	text := "first:\n" + block("MIIEowIBAAKCAQEAfirstkeyfirstkey") + "between\n" + block("MIIEowIBAAKCAQEAsecondkeysecond") + "after\n"
	for size := 1; size <= 9; size++ {
		var deltas []string
		for i := 0; i < len(text); i += size {
			deltas = append(deltas, text[i:min(i+size, len(text))])
		}
		deltas = append(deltas, "tail without a line break")
		all, got := streamedOutput(t, "", deltas)
		assert.NotContains(t, all, "firstkey", "pieces of %d bytes", size)
		assert.NotContains(t, all, "secondkey", "pieces of %d bytes", size)
		assert.Equal(t, 2, strings.Count(all, "[REDACTED:private-key]"), "pieces of %d bytes: %q", size, all)
		assert.True(t, strings.HasSuffix(all, "after\ntail without a line break"), "pieces of %d bytes: %q", size, all)
		require.Greater(t, len(got), 2, "pieces of %d bytes", size)
		assert.NotContains(t, got[len(got)-1], "between", "pieces of %d bytes: the text between went out when the first block ended", size)
	}
}
