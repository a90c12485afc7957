package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNameList(t *testing.T) {
	assert.Equal(t, "a", nameList([]string{"a"}))
	assert.Equal(t, "a, b, c, d, e", nameList([]string{"a", "b", "c", "d", "e"}))
	assert.Equal(t, "a, b, c, d, e and 2 more", nameList([]string{"a", "b", "c", "d", "e", "f", "g"}))
}
