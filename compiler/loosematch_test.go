package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A host pattern anchored at its end is loose where its name does not
// begin at a label boundary: the probe it is tried on is the host named.
func TestLooseHostSuffix(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
	}{
		{`example\.com$`, "evilexample.com"},
		{`example\.(com|org)$`, "evilexample.com"},
		{`^.*example\.com$`, "evilexample.com"},
		{`^a\.example\.com$|example\.org$`, "evilexample.org"},
		{`[a-z]example\.com\z`, "evilaexample.com"},
		{`(^|\.)example\.com$`, ""},
		{`\.example\.com$`, ""},
		{`^example\.com$`, ""},
		{`^(api|www)\.example\.com$`, ""},
		{`^[a-z]+\.example\.com$`, ""},
		{`(`, ""},
	} {
		host, loose := looseHostSuffix(tc.pattern)
		assert.Equal(t, tc.host, host, tc.pattern)
		assert.Equal(t, tc.host != "", loose, tc.pattern)
	}
}
