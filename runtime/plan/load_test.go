package plan

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeRoundTrip(t *testing.T) {
	p := &Plan{
		Version: Version,
		Policy:  "support",
		Models:  map[string]Model{"primary": {USDPerMTokIn: 3, USDPerMTokOut: 15}},
		Tools:   map[string]Tool{"refund": {SideEffecting: true, Args: json.RawMessage(`{"type":"object"}`)}},
		Chains: Chains{Tool: []Layer{{
			Use: "guard", Name: "limit", Config: json.RawMessage(`{"phase":"before"}`),
			Predicates: map[string]*Predicate{"deny": {Stage: StageTool, Phase: "before", Source: "args.amount > 1.0", Tools: []string{"refund"}}},
		}}},
	}
	b, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode("mem", b)
	require.NoError(t, err)
	again, err := Encode(got)
	require.NoError(t, err)
	assert.JSONEq(t, string(b), string(again))
	assert.Equal(t, "args.amount > 1.0", got.Chains.Tool[0].Predicates["deny"].Source)
	assert.True(t, got.Tools["refund"].SideEffecting)
}

// TestUnnamedLayerRoundTrips: a layer's name is optional (it defaults to
// its use), so a plan with an unnamed layer encodes and decodes, and the same
// name may appear in different chains.
func TestUnnamedLayerRoundTrips(t *testing.T) {
	p := &Plan{Version: Version, Policy: "p", Chains: Chains{
		Chat: []Layer{{Use: "retry"}, {Use: "retry", Name: "second"}},
		Tool: []Layer{{Use: "retry"}},
	}}
	b, err := Encode(p)
	require.NoError(t, err)
	got, err := Decode("enc", b)
	require.NoError(t, err)
	assert.Equal(t, p.Chains, got.Chains)
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"not json", `{"version":`, []string{"not JSON"}},
		{"trailing", `{"version":1,"policy":"p","chains":{}} {}`, []string{"trailing data"}},
		{"wrong version", `{"version":2,"policy":"p","chains":{}}`, []string{"/version"}},
		{"missing chains", `{"version":1,"policy":"p"}`, []string{"missing properties: 'chains'"}},
		{"unknown field", `{"version":1,"policy":"p","chains":{},"extra":1}`, []string{"additionalProperties 'extra' not allowed"}},
		{"layer without use", `{"version":1,"policy":"p","chains":{"tool":[{"name":"x"}]}}`, []string{"/chains/tool/0"}},
		{"bad stage", `{"version":1,"policy":"p","chains":{},"admit":{"stage":"nope","source":"true"}}`, []string{"/admit/stage"}},
		{"duplicate name", `{"version":1,"policy":"p","chains":{"chat":[{"use":"retry","name":"r"},{"use":"log","name":"r"}]}}`,
			[]string{`/chains/chat/1/name: duplicate layer name "r" in the chat chain (also /chains/chat/0)`}},
		{"duplicate defaulted name", `{"version":1,"policy":"p","chains":{"tool":[{"use":"log"},{"use":"retry"},{"use":"log"}]}}`,
			[]string{`/chains/tool/2: duplicate layer name "log" in the tool chain (also /chains/tool/0)`}},
		{"empty name", `{"version":1,"policy":"p","chains":{"tool":[{"use":"log","name":""}]}}`, []string{"/chains/tool/0/name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("bad.json", []byte(tt.in))
			require.Error(t, err)
			var pe *Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "bad.json", pe.Source)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
