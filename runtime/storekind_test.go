package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A store kind agentc ships that the host did not link is named with the
// package that registers it: a host that imported the builtins one by one
// learns which import it lacks.
func TestUnregisteredStoreKindNamesItsPackage(t *testing.T) {
	assert.Equal(t, `kind "postgres" is not registered (registered: [memory]; import github.com/agentc-dev/agentc/runtime/store/postgres, or builtins/all, or provide the store in Deps)`,
		unregisteredKind("postgres", []string{"memory"}))
	assert.Equal(t, `kind "etcd" is not registered (registered: [memory postgres]; import its package, or provide the store in Deps)`,
		unregisteredKind("etcd", []string{"memory", "postgres"}))
}
