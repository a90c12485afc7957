package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// openPatterns are configured patterns a match of which may hold line breaks: in a run of
// spaces, in a class that takes any character, in a lazy repetition, in an optional part.
var openPatterns = []string{
	`ACCT-\s*[0-9]{6}`,
	`tok_[a-z]+`,
	`(?i)account number:\s*[0-9]{8}`,
	`(?s)BEGIN SECRET.*?END SECRET`,
	`pin[^0-9]{0,12}[0-9]{4}\b`,
	`code(?:\s+word)?\s+[A-Z]{5}`,
	`x{2}(?:\n\s*y{2})+`,
}

// streamedOutput streams deltas through a redact layer with config and returns the text
// that got through, and the texts of its deltas.
func streamedOutput(t testing.TB, config string, deltas []string) (string, []string) {
	t.Helper()
	model := rt.NewModel(rt.Response{Deltas: deltas})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	var got []string
	_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		got = append(got, d.Text)
		return true
	})
	require.NoError(t, err)
	return strings.Join(got, ""), got
}

// openConfigs are the layer's configurations the stream is checked with: the patterns
// alone, and with the default rules.
func openConfigs(t testing.TB) map[string]*Redactor {
	out := map[string]*Redactor{}
	for _, defaults := range []bool{false, true} {
		cfg := Config{DisableDefaults: !defaults}
		for i, p := range openPatterns {
			cfg.Patterns = append(cfg.Patterns, Pattern{ID: fmt.Sprintf("pattern-%d", i), Regex: p})
		}
		r, err := New(cfg)
		require.NoError(t, err)
		config, err := json.Marshal(map[string]any{"defaults": defaults, "patterns": openPatterns})
		require.NoError(t, err)
		out[string(config)] = r
	}
	return out
}

// openPieces are what the random texts are made of: words, spaces and line breaks, matches
// of openPatterns and of the default rules with line breaks inside, and texts that begin
// like one and do not end like one.
var openPieces = []func(r *rand.Rand) string{
	func(r *rand.Rand) string {
		return []string{"the", "account", "number", "code", "word", "pin", "ok", "x", "y"}[r.IntN(9)]
	},
	func(r *rand.Rand) string { return []string{" ", "\n", "\n\n", "  \n ", ", ", ": "}[r.IntN(6)] },
	func(r *rand.Rand) string { return "ACCT-" + spaces(r) + digits(r, 5+r.IntN(3)) },
	func(r *rand.Rand) string { return "tok_" + []string{"abc", "x", ""}[r.IntN(3)] },
	func(r *rand.Rand) string {
		return []string{"Account number:", "account NUMBER:"}[r.IntN(2)] + spaces(r) + digits(r, 7+r.IntN(2))
	},
	func(r *rand.Rand) string {
		body := "line one\nline " + digits(r, 2) + "\n"
		return "BEGIN SECRET" + body[:r.IntN(len(body))] + []string{"END SECRET", "END SEC", ""}[r.IntN(3)]
	},
	func(r *rand.Rand) string {
		return "pin" + []string{":\n", " is\n ", "-"}[r.IntN(3)] + digits(r, 3+r.IntN(3))
	},
	func(r *rand.Rand) string {
		return "code" + []string{" word\n", "\n", " "}[r.IntN(3)] + []string{"ABCDE", "ABC", "abcde"}[r.IntN(3)]
	},
	func(r *rand.Rand) string {
		return "xx" + strings.Repeat("\n "+[]string{"yy", "y"}[r.IntN(2)], r.IntN(3))
	},
	func(r *rand.Rand) string {
		return []string{"password:", "token", "Bearer"}[r.IntN(3)] + spaces(r) + "hunter22x"
	},
}

func spaces(r *rand.Rand) string { return []string{"", " ", "\n", " \n ", "\n\n"}[r.IntN(5)] }

func digits(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

// openText returns a random text of openPieces.
func openText(r *rand.Rand) string {
	var b strings.Builder
	for range 3 + r.IntN(8) {
		b.WriteString(openPieces[r.IntN(len(openPieces))](r))
	}
	return b.String()
}

// checkStreamedAsWhole checks that text streamed as deltas through a layer with config goes
// out as r masks it whole.
func checkStreamedAsWhole(t testing.TB, config string, r *Redactor, text string, deltas []string) {
	t.Helper()
	want, _ := r.Redact(text)
	got, _ := streamedOutput(t, config, deltas)
	if got != want {
		t.Fatalf("%s: %q streamed as %q went out as\n%q, masked whole it is\n%q", config, text, deltas, got, want)
	}
}

// TestStreamedOutputMaskedAsWhole: random texts holding matches of configured patterns that
// may hold line breaks (and of the default rules), and texts that begin like them, go out
// of the layer exactly as Redact masks the whole text, whether they arrive in one delta,
// cut in two at every byte, or a few bytes a delta.
func TestStreamedOutputMaskedAsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	n := 30
	if testing.Short() {
		n = 10
	}
	configs := openConfigs(t)
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		r := configs[config]
		for range n {
			checkCutsStreamedAsWhole(t, config, r, openText(rng), rng)
		}
	}
}

// checkCutsStreamedAsWhole checks text in one delta, cut in two at every byte, and a few
// bytes a delta.
func checkCutsStreamedAsWhole(t testing.TB, config string, r *Redactor, text string, rng *rand.Rand) {
	t.Helper()
	checkStreamedAsWhole(t, config, r, text, []string{text})
	for cut := 1; cut < len(text); cut++ {
		checkStreamedAsWhole(t, config, r, text, []string{text[:cut], text[cut:]})
	}
	var deltas []string
	for i := 0; i < len(text); {
		k := min(len(text), i+1+rng.IntN(4))
		deltas = append(deltas, text[i:k])
		i = k
	}
	checkStreamedAsWhole(t, config, r, text, deltas)
}

// FuzzStreamedOutput: any text, cut anywhere into three deltas, goes out of the layer as
// Redact masks the whole text.
func FuzzStreamedOutput(f *testing.F) {
	f.Add("Your account number:\n12345678, thanks", 20, 5)
	f.Add("ACCT-\n\n123456 BEGIN SECRET\nx\nEND SECRET\n", 6, 30)
	f.Add("code word\nABCDE pin:\n1234\nxx\n yy\n yy", 3, 17)
	configs := openConfigs(f)
	f.Fuzz(func(t *testing.T, text string, a, b int) {
		if len(text) > 512 {
			return
		}
		a, b = min(max(a, 0), len(text)), min(max(b, 0), len(text))
		a, b = min(a, b), max(a, b)
		for config, r := range configs {
			checkStreamedAsWhole(t, config, r, text, []string{text[:a], text[a:b], text[b:]})
		}
	})
}
