package pii

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// randomShape writes the pieces of a text cut at random points as a JSON document of random
// shape: the strings of arrays, the keys and values of objects (a key now and then written
// twice), a number now and then, and now and then a document of its own held in a string.
func randomShape(r *rand.Rand, pieces []string, depth int) string {
	var b strings.Builder
	quote := func(s string) string {
		q, _ := json.Marshal(s)
		return string(q)
	}
	if r.IntN(2) == 0 {
		b.WriteString("[")
		for i, p := range pieces {
			if i > 0 {
				b.WriteString(", ")
			}
			switch {
			case r.IntN(10) == 0:
				b.WriteString(strconv.Itoa(r.IntN(100000)) + ", ")
			case depth < 2 && r.IntN(12) == 0:
				b.WriteString(quote(randomShape(r, []string{p}, depth+1)) + ", ")
			}
			b.WriteString(quote(p))
		}
		b.WriteString("]")
		return b.String()
	}
	b.WriteString("{")
	for i := 0; i < len(pieces); i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		key := "k" + strconv.Itoa(r.IntN(4)) // repeated keys now and then
		if r.IntN(4) == 0 || i+1 == len(pieces) {
			key = pieces[i]
			if i+1 < len(pieces) {
				i++
			}
		}
		val := quote(pieces[i])
		if depth < 2 && r.IntN(12) == 0 {
			val = quote(randomShape(r, []string{pieces[i]}, depth+1))
		}
		b.WriteString(quote(key) + ": " + val)
	}
	b.WriteString("}")
	return b.String()
}

// TestShapesBlockedAreMasked is a property test through the layer: a text of personal data
// cut at random points and written as a JSON document of random shape (randomShape), in a tool
// message, as the arguments of a tool call sent back or made by the model, and as a tool's
// arguments, is either let through by "block", or refused by it and sent by "redact" as
// something "block" lets through.
func TestShapesBlockedAreMasked(t *testing.T) {
	block, redact := layerPipeline(t, `{}`), layerPipeline(t, `{"action":"redact"}`)
	s := newScanner(t)
	blockCalls, redactCalls := &Middleware{Action: ActionBlock, scanner: s}, &Middleware{Action: ActionRedact, scanner: s}
	r := rand.New(rand.NewPCG(21, 7))
	refused := 0
	for iter := 0; iter < 1500; iter++ {
		text := randomPIIText(r)
		if len(text) < 2 {
			continue
		}
		doc := randomShape(r, cutAtRandom(r, text), 0)
		require.True(t, json.Valid([]byte(doc)), doc)
		// the model's own call, and a tool's arguments (decoded into a map: a key written twice
		// keeps its last member, as the tool receives it)
		call := []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(doc)}}
		if _, err := blockCalls.cleanCalls(slices.Clone(call)); err != nil {
			refused++
			out, err := redactCalls.cleanCalls(slices.Clone(call))
			require.NoError(t, err)
			_, err = blockCalls.cleanCalls(out)
			require.NoError(t, err, "iteration %d: the call %s went out as %s", iter, doc, out[0].Arguments)
		}
		var v any
		require.NoError(t, json.Unmarshal([]byte(doc), &v))
		if len(s.ScanValue(v)) > 0 {
			red, _ := s.RedactValue(v)
			require.Empty(t, s.ScanValue(red), "iteration %d: the arguments %s reached the tool as %v", iter, doc, red)
		}
		for _, msgs := range [][]runtime.Message{
			{{Role: "tool", ToolCallID: "c1", Content: doc}},
			{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(doc)}}}},
		} {
			if _, blocked := blockedIsMasked(t, block, redact, msgs, iter, doc); blocked {
				refused++
			}
		}
	}
	t.Logf("%d documents refused by block", refused)
	require.Positive(t, refused)
}
