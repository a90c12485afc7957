package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRepeatedCallsReadArgumentsAsTheClientDoes: a refund of the note
// "\ud800" (an escaped surrogate that is not half of a pair) and one of
// "\ufffd" were read as the same call, since Go's decoder reads the first
// as the second, and the second was not run (agentc serve left it out),
// while a client's parser (Python's, JavaScript's) reads two notes. Such
// arguments, and bytes that are not UTF-8, are compared as written; a
// pair escaped is the character it escapes.
func TestRepeatedCallsReadArgumentsAsTheClientDoes(t *testing.T) {
	pl := rt.Build(t, refundPlan(), runtime.Deps{})
	repeats := func(a, b string) bool {
		return pl.RepeatedCalls([]runtime.ToolUse{use("a", "refund", a), use("b", "refund", b)}) != nil
	}
	assert.False(t, repeats(`{"note":"\ud800"}`, `{"note":"\ufffd"}`))
	assert.False(t, repeats(`{"note":"\uDC00"}`, `{"note":"\ufffd"}`))
	assert.False(t, repeats(`{"note":"\ud800\u0041"}`, `{"note":"\ufffdA"}`))
	assert.False(t, repeats("{\"note\":\"\xff\"}", `{"note":"\ufffd"}`))
	assert.True(t, repeats(`{"note":"\ud800"}`, `{"note":"\ud800"}`), "the same text is the same call")
	assert.True(t, repeats(`{"note":"\ud83d\ude00"}`, `{"note":"😀"}`), "a pair escaped is its character")
	assert.True(t, repeats(`{"note":"\\ud800"}`, `{"note":"\u005cud800"}`), "an escaped backslash escapes nothing")
	assert.True(t, repeats(`{"amount":5,"note":"é"}`, `{"note":"\u00e9","amount":5.0}`))
}
