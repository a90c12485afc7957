package credential

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A key's tails after a separator are forms of it when long enough to be
// its alone; a short tail, or a key without separator, adds none.
func TestKeyForms(t *testing.T) {
	assert.Equal(t, []string{"sk-ant-api03-Ab12Cd34Ef56Gh78", "ant-api03-Ab12Cd34Ef56Gh78", "api03-Ab12Cd34Ef56Gh78", "Ab12Cd34Ef56Gh78"},
		KeyForms("sk-ant-api03-Ab12Cd34Ef56Gh78"))
	assert.Equal(t, []string{"sk-proj-short"}, KeyForms("sk-proj-short"))
	assert.Equal(t, []string{"plainkey1234567890"}, KeyForms("plainkey1234567890"))
	assert.Nil(t, KeyForms(""))
}
