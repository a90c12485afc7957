package runtime_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime"
)

// A calls ceiling reached by calls in flight (another replica's, or a
// replica killed mid-call whose reservation holds its place until its lease
// ends) says so: "ceiling 2 reached (spent 1)" read as a miscount.
func TestBudgetErrorNamesTheCallsInFlight(t *testing.T) {
	e := &runtime.BudgetError{Layer: "meter", Resource: "calls", Spent: 1, Limit: 2, Pending: 1}
	assert.Equal(t, "budget exhausted at meter: calls ceiling 2 reached (spent 1, 1 reserved by calls in flight)", e.Error())
	e.Pending = 0
	assert.Equal(t, "budget exhausted at meter: calls ceiling 2 reached (spent 1)", e.Error())
}

// An estimate whose output is near the largest int64 (a request's
// max_tokens of 2^63-1) plus its input tokens wrapped around to a negative
// count, which a tokens ceiling admitted and a lapsed reservation held as
// nothing. The sum saturates: the call is refused, the hold is the most.
func TestHugeEstimateIsNotWrappedAround(t *testing.T) {
	ceiling := int64(1000)
	est := &runtime.Ledger{InputTokens: 5, OutputTokens: math.MaxInt64}
	assert.Equal(t, int64(math.MaxInt64), est.Tokens())
	e := runtime.CheckBudget(runtime.Ledger{}, runtime.Ledger{}, runtime.BudgetLimits{Tokens: &ceiling, Estimate: est})
	if assert.NotNil(t, e, "the estimate crosses the ceiling") {
		assert.Equal(t, "tokens", e.Resource)
	}
	assert.Equal(t, int64(math.MaxInt64), runtime.Hold(est).InputTokens)
	assert.Equal(t, int64(math.MaxInt64), runtime.Usage{InputTokens: 5, OutputTokens: math.MaxInt64}.Total())
}
