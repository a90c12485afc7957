package compiler

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

// aliasFindings compiles a policy of one chat guard and returns its findings,
// each as "rule severity: message" with the transcript named T, whichever
// name the predicate gives it.
func aliasFindings(t *testing.T, when, field, pred string) []string {
	t.Helper()
	w := ""
	if when != "" {
		w = fmt.Sprintf("when: %q, ", when)
	}
	dir := writePolicy(t, `package p

tools: send: {args: {type: "object", additionalProperties: false, properties: {to: {type: "string"}, body: {type: "string"}}}}
chains: chat: [{use: "guard", name: "g", `+w+field+`: `+fmt.Sprintf("%q", pred)+`}]
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	var got []string
	for _, d := range c.Diagnostics {
		msg := strings.ReplaceAll(strings.ReplaceAll(d.Message, "request.messages", "T"), "messages", "T")
		got = append(got, fmt.Sprintf("%s %s: %s", d.Rule, d.Severity, msg))
	}
	return got
}

// messages is request.messages: a predicate that names the transcript one
// way in one place and the other way in another gets the findings it gets
// naming it one way throughout.
func TestTranscriptAliasFindings(t *testing.T) {
	for _, tc := range []struct{ when, field, pred string }{
		{"", "deny", "size(R) < 1 && size(Q) > 5"},
		{"", "deny", "size(R) >= 0 || size(Q) < 0"},
		{"", "require", "size(R) > 2 || size(Q) <= 2"},
		{"", "deny", "size(R) > 0 && R[0].role == 'user' && Q[0].role == 'system'"},
		{"size(R) > 3", "deny", "size(Q) < 2"},
		{"size(R) > 0 && R[0].role == 'system'", "deny", "size(Q) > 0 && Q[0].role == 'user'"},
		{"", "deny", "size(R) > 1 && size(R[1].tool_calls) > 0 && R[1].tool_calls[0].name == 'send' && Q[1].tool_calls[0].args.tooo == 'x'"},
	} {
		same := func(r, q string) []string {
			rep := strings.NewReplacer("R", r, "Q", q)
			return aliasFindings(t, rep.Replace(tc.when), tc.field, rep.Replace(tc.pred))
		}
		want := same("request.messages", "request.messages")
		require.NotEmpty(t, want, tc.pred)
		assert.Equal(t, want, same("messages", "messages"), tc.pred)
		assert.Equal(t, want, same("messages", "request.messages"), tc.pred)
		assert.Equal(t, want, same("request.messages", "messages"), tc.pred)
	}
}

// Each alias the analyses read as its variable's path is the same value
// at run time.
func TestVariableAliasesResolveAlike(t *testing.T) {
	v := &predicate.ChatVars{Request: predicate.ChatRequest{Messages: []predicate.Message{{Role: "user"}}}}
	for alias, path := range variableAliases {
		got, ok := v.ResolveName(alias)
		require.True(t, ok, alias)
		root, field, _ := strings.Cut(path, ".")
		require.Equal(t, "request", root, path)
		require.Equal(t, "messages", field, path)
		assert.Same(t, &v.Request.Messages, got, alias)
	}
}
