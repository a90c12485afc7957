package predicate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

func TestModelWhen(t *testing.T) {
	for _, tc := range []struct {
		src, model   string
		value, known bool
	}{
		{"request.model == 'big'", "big", true, true},
		{"request.model == 'big'", "small", false, true},
		{"request.model.startsWith('b') && size(messages) > 2", "small", false, true},
		{"request.model.startsWith('b') && size(messages) > 2", "big", false, false},
		{"run.?meta.?tier.orValue('') == 'x' || request.model != 'big'", "small", true, true},
		{"request.model == 'big'", "", false, false}, // the model unknown too
		{"request.model ==", "big", false, false},    // does not compile
		{"request.model", "big", false, false},       // not a bool
	} {
		value, known := predicate.ModelWhen(tc.src, tc.model)
		assert.Equal(t, tc.known, known, "%s for %q", tc.src, tc.model)
		assert.Equal(t, tc.value, value, "%s for %q", tc.src, tc.model)
	}
}
