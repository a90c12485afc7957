package schemas_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/schemas"
)

// TestIdentifierPatternIsTheSchemas: IdentifierPattern is the pattern of
// #Identifier, as policy.cue writes it.
func TestIdentifierPatternIsTheSchemas(t *testing.T) {
	b, err := schemas.CUE.ReadFile("policy.cue")
	require.NoError(t, err)
	assert.Contains(t, string(b), "\n#Identifier: =~"+strconv.Quote(schemas.IdentifierPattern)+"\n")
}
