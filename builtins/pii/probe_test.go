package pii_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// probeItems are the personal data the probes try to get through.
var probeItems = map[string]string{
	"card":  "4111 1111 1111 1111",
	"email": "jane.doe@example.com",
	"phone": "+1 415 555 2671",
	"ssn":   "SSN 078-05-1120",
	"iban":  "DE89 3704 0044 0532 0130 00",
}

// probeSpellings are the spellings the probes write a value in.
var probeSpellings = textnormtest.Encodings()

// probePositions run a text through a pii layer configured with config in one place personal
// data can reach the model, a tool or the caller, and return what got through, or the error.
var probePositions = map[string]func(t *testing.T, config, text string) (string, error){
	"user message": func(t *testing.T, config, text string) (string, error) {
		return seenByModel(t, config, []runtime.Message{{Role: "user", Content: "here: " + text + " ok"}})
	},
	"tool message": func(t *testing.T, config, text string) (string, error) {
		return seenByModel(t, config, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: text}})
	},
	"tool call arguments sent back": func(t *testing.T, config, text string) (string, error) {
		args, err := json.Marshal(map[string]any{"q": text})
		require.NoError(t, err)
		return seenByModel(t, config, []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: args}}}})
	},
	"tool arguments": func(t *testing.T, config, text string) (string, error) {
		var seen map[string]any
		pl := toolPipeline(t, config, func(_ context.Context, c *runtime.ToolCall) (any, error) {
			seen = c.Args
			return "done", nil
		})
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{"body": text, "list": []any{"x", text}}})
		return fmt.Sprint(seen), err
	},
	"model output": func(t *testing.T, config, text string) (string, error) {
		out, _, err := streamPII(t, config, []runtime.Delta{{Text: "sure:\n" + text[:len(text)/2]}, {Text: text[len(text)/2:] + "\ndone"}})
		return out, err
	},
	"model tool call": func(t *testing.T, config, text string) (string, error) {
		args, err := json.Marshal(map[string]string{"body": text})
		require.NoError(t, err)
		_, calls, err := streamPII(t, config, []runtime.Delta{
			{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: string(args)}}},
			{FinishReason: runtime.FinishToolCalls}})
		return calls, err
	},
}

// seenByModel sends msgs through a pii layer and returns what the model read.
func seenByModel(t *testing.T, config string, msgs []runtime.Message) (string, error) {
	model := &recordingModel{}
	_, err := chatPipeline(t, config, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	if len(model.seen) == 0 {
		return "", err
	}
	b, jerr := json.Marshal(model.seen[0])
	require.NoError(t, jerr)
	return string(b), err
}

// streamPII streams deltas from a model through a pii layer and returns the text and the
// tool calls' arguments that got through.
func streamPII(t *testing.T, config string, deltas []runtime.Delta) (string, string, error) {
	model := rt.NewModel(rt.Response{Stream: deltas})
	var text strings.Builder
	var calls runtime.ToolCallBuilder
	_, err := chatPipeline(t, config, model).Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		text.WriteString(d.Text)
		calls.Add(&d)
		return true
	})
	var args strings.Builder
	for _, c := range calls.ToolCalls() {
		args.Write(c.Arguments)
	}
	return text.String(), args.String(), err
}

// TestProbePersonalDataDoesNotGetThrough tries every item, in every spelling, in every
// position, with either action: "block" refuses the call, "redact" lets through neither the
// item nor its encoding.
func TestProbePersonalDataDoesNotGetThrough(t *testing.T) {
	for iname, item := range probeItems {
		for wname, spell := range probeSpellings {
			written := spell(item)
			for pname, through := range probePositions {
				t.Run(iname+"/"+wname+"/"+pname+"/block", func(t *testing.T) {
					got, err := through(t, `{}`, written)
					var b *runtime.BlockedError
					require.ErrorAs(t, err, &b)
					assert.NotContains(t, got, written)
				})
				t.Run(iname+"/"+wname+"/"+pname+"/redact", func(t *testing.T) {
					got, err := through(t, `{"action":"redact"}`, written)
					require.NoError(t, err)
					assert.NotContains(t, got, written)
					assert.NotContains(t, got, written[len(written)-8:], "no piece of the encoding is left")
					assert.Contains(t, got, "[REDACTED:")
				})
			}
		}
	}
}
