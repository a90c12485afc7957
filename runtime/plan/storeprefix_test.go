package plan_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// TestDecodeRefusesAPostgresPrefixTheStoreRefuses checks that a plan whose
// postgres store has a prefix the store would refuse when it opens (not a
// lower-case identifier, a schema PostgreSQL keeps for itself, public) is
// refused when it loads, at the prefix, as vet refuses it in the policy;
// a redis prefix keeps its freedom.
func TestDecodeRefusesAPostgresPrefixTheStoreRefuses(t *testing.T) {
	doc := func(kind, prefix string) string {
		return fmt.Sprintf(`{"version":1,"policy":"p","chains":{},"stores":{"shared":{"kind":%q,"url_env":"DB_URL","prefix":%q}}}`, kind, prefix)
	}
	for _, prefix := range []string{"Billing", "billing.v2", "pg_catalog", "pg_billing", "information_schema", "public",
		"b012345678901234567890123456789012345678901234567890123456789012"} {
		_, err := plan.Decode("plan.json", []byte(doc("postgres", prefix)))
		require.Error(t, err, prefix)
		assert.Contains(t, err.Error(), "/stores/shared/prefix", prefix)
		if prefix == "public" || prefix == "pg_catalog" {
			assert.Contains(t, err.Error(), "a schema of the store's own", prefix)
		}
	}
	for _, ok := range [][2]string{{"postgres", "billing"}, {"postgres", "billing_v2"}, {"redis", "Billing:v2"}, {"redis", "public"}} {
		_, err := plan.Decode("plan.json", []byte(doc(ok[0], ok[1])))
		assert.NoError(t, err, ok)
	}
}

// A prefix the schema reserves is named with the field and what reserves
// it, not with the schema's bare "value must be" of its constant.
func TestDecodeSaysWhatAReservedPrefixIsReservedFor(t *testing.T) {
	for _, prefix := range []string{"pg_catalog", "information_schema", "public"} {
		doc := fmt.Sprintf(`{"version":1,"policy":"p","chains":{},"stores":{"shared":{"kind":"postgres","url_env":"DB_URL","prefix":%q}}}`, prefix)
		_, err := plan.Decode("plan.json", []byte(doc))
		var pe *plan.Error
		require.ErrorAs(t, err, &pe, prefix)
		require.Len(t, pe.Problems, 1, prefix)
		assert.Equal(t, fmt.Sprintf(`/stores/shared/prefix (line 1, col 105): prefix %q is reserved: a postgres store's prefix names a schema of the store's own; pg_ names and information_schema are PostgreSQL's, public is the database's default schema`, prefix),
			pe.Problems[0])
		assert.NotContains(t, pe.Problems[0], "value must be")
	}
}
