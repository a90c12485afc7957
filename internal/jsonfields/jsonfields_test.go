package jsonfields

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

type inner struct {
	Shared string `json:"shared"`
	Deep   int    `json:"deep"`
}

type outer struct {
	*inner
	Shared  bool   `json:"shared"`
	Plain   string // no tag: the Go name
	Skipped string `json:"-"`
	Opt     []int  `json:"opt,omitempty"`
	hidden  string
}

func TestOf(t *testing.T) {
	_ = outer{}.hidden
	assert.Equal(t, map[string]reflect.Type{
		"shared": reflect.TypeFor[bool](),
		"deep":   reflect.TypeFor[int](),
		"Plain":  reflect.TypeFor[string](),
		"opt":    reflect.TypeFor[[]int](),
	}, Of(reflect.TypeFor[outer]()))
}
