package envtmpl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVars(t *testing.T) {
	vars, err := Vars("Bearer ${GITHUB_TOKEN} ${A_1}${GITHUB_TOKEN} $$5")
	require.NoError(t, err)
	assert.Equal(t, []string{"GITHUB_TOKEN", "A_1"}, vars)

	vars, err = Vars("plain")
	require.NoError(t, err)
	assert.Empty(t, vars)

	for value, want := range map[string]string{
		"Bearer $TOKEN":  "offset 7: a $ that is neither ${NAME} nor $$",
		"Bearer ${TOKEN": "offset 7: ${ without its closing }",
		"${1X}":          "offset 0: ${1X} is not a variable reference",
		"${}":            "offset 0: ${} is not a variable reference",
		"x ${A-B}":       "offset 2: ${A-B} is not a variable reference",
		"cost $":         "offset 5: a $ that is neither",
	} {
		_, err := Vars(value)
		require.Error(t, err, value)
		assert.Contains(t, err.Error(), want, value)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cr$t", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	got, err := Expand("Bearer ${TOKEN} costs $$1", lookup)
	require.NoError(t, err)
	assert.Equal(t, "Bearer s3cr$t costs $1", got, "a $ in a variable's value is kept as it is")

	_, err = Expand("Bearer ${MISSING}", lookup)
	require.EqualError(t, err, "environment variable MISSING is not set")
	_, err = Expand("Bearer ${EMPTY}", lookup)
	require.EqualError(t, err, "environment variable EMPTY is not set")
	_, err = Expand("Bearer $TOKEN", lookup)
	require.Error(t, err)
}
