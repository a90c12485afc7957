package runtime_test

import (
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
