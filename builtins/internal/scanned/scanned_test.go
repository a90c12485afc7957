package scanned_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
)

func TestEach(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "system", Content: "sys"},
		{Role: "user", Content: "u", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "part"},
			{Type: runtime.PartToolResult, Text: "res-part"}, {Type: runtime.PartImage, ImageURL: "https://x"}}},
		{Role: "assistant", Content: "a", ToolCalls: []runtime.ToolUse{{Name: "t", Arguments: json.RawMessage(`{"k":"v","n":4111111111111111}`)}}},
		{Role: "tool", Content: "res"},
		{Role: "user", Content: ""},
	}
	type seen struct {
		i          int
		kind, text string
	}
	walk := func(system bool) []seen {
		var got []seen
		require.NoError(t, scanned.Each(msgs, system, func(i int, kind, text string) error {
			got = append(got, seen{i, kind, text})
			return nil
		}))
		return got
	}
	rest := []seen{
		{1, scanned.KindMessage, "u\npart"}, {1, scanned.KindToolResult, "res-part"},
		{2, scanned.KindMessage, "a"}, {2, scanned.KindToolCall, "k\nv\nn\n4111111111111111"},
		{3, scanned.KindToolResult, "res"},
	}
	assert.Equal(t, rest, walk(false))
	assert.Equal(t, append([]seen{{0, scanned.KindMessage, "sys"}}, rest...), walk(true))
}

func TestRecord(t *testing.T) {
	var r scanned.Record
	assert.False(t, r.Has("r1", "x"))
	r.Add("r1", "x")
	assert.True(t, r.Has("r1", "x"))
	assert.False(t, r.Has("r2", "x"), "runs do not share a record")
	r.Add("", "y")
	assert.False(t, r.Has("", "y"), "a call without a run records nothing")
	r.EndRun("r1")
	assert.False(t, r.Has("r1", "x"))

	o := scanned.NewOutput()
	o.Write("hel")
	o.Write("lo")
	assert.Equal(t, scanned.Of("hello"), o.Digest())
}
