package jsonfields

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// Walk reads a document along a type: each struct member with its field's
// type and its place, map entries and list items along their element type,
// what the type leaves open skipped; a hook's error ends it.
func TestWalk(t *testing.T) {
	type leaf struct {
		N int `json:"n"`
	}
	type doc struct {
		List []leaf            `json:"list"`
		Map  map[string]leaf   `json:"map"`
		Any  any               `json:"any"`
		Raw  json.RawMessage   `json:"raw"`
		Ptr  *leaf             `json:"ptr"`
		Deep map[string][]leaf `json:"deep"`
	}
	var members, values []string
	w := Walk{
		Member: func(path, key string, fields map[string]reflect.Type) (reflect.Type, error) {
			members = append(members, path+"|"+key)
			if key == "stop" {
				return nil, errors.New("stopped at " + path)
			}
			return fields[key], nil
		},
		Value: func(path string, t reflect.Type, tok json.Token, _ int64) (bool, error) {
			values = append(values, path+"|"+t.Kind().String())
			return false, nil
		},
		Field: func(path, key string) string { return path + "." + key },
		Key:   func(path, key string) string { return path + "[" + key + "]" },
		Index: func(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" },
	}
	w.Dec = json.NewDecoder(strings.NewReader(`{"list":[{"n":1}],"map":{"a":{"n":2}},"any":{"n":{"x":1}},"raw":{"n":3},"ptr":{"n":4},"deep":{"k":[{"n":5}]},"other":{"n":6}}`))
	require.NoError(t, w.Read(reflect.TypeFor[doc](), ""))
	assert.Equal(t, []string{"|list", ".list[0]|n", "|map", ".map[a]|n", "|any", "|raw", "|ptr", ".ptr|n", "|deep", ".deep[k][0]|n", "|other"}, members,
		"an open value is not walked into, an unknown member is skipped")
	assert.Contains(t, values, ".deep[k][0].n|int")
	assert.NotContains(t, values, ".any|interface", "an open value is not asked about")

	w.Dec = json.NewDecoder(strings.NewReader(`{"ptr":{"stop":1}}`))
	assert.EqualError(t, w.Read(reflect.TypeFor[doc](), ""), "stopped at .ptr")
}

// TestWalkOpaque: with Opaque, each value of a type that leaves its form
// open is handed over whole, at its path, and the walk goes on after it;
// an error of Opaque ends the walk.
func TestWalkOpaque(t *testing.T) {
	type doc struct {
		Any  any               `json:"any"`
		Raw  []json.RawMessage `json:"raw"`
		Last int               `json:"last"`
	}
	var opaque, members []string
	w := Walk{
		Member: func(path, key string, fields map[string]reflect.Type) (reflect.Type, error) {
			members = append(members, key)
			return fields[key], nil
		},
		Opaque: func(path string, t reflect.Type, raw json.RawMessage) error {
			opaque = append(opaque, path+"|"+string(raw))
			if string(raw) == `"stop"` {
				return errors.New("stopped at " + path)
			}
			return nil
		},
		Field: func(path, key string) string { return path + "." + key },
		Index: func(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" },
	}
	w.Dec = json.NewDecoder(strings.NewReader(`{"any":{"n":[1,2]},"raw":[3,{"x":"y"}],"last":4}`))
	require.NoError(t, w.Read(reflect.TypeFor[doc](), ""))
	assert.Equal(t, []string{`.any|{"n":[1,2]}`, `.raw[0]|3`, `.raw[1]|{"x":"y"}`}, opaque)
	assert.Equal(t, []string{"any", "raw", "last"}, members, "the walk goes on after an opaque value")

	w.Dec = json.NewDecoder(strings.NewReader(`{"raw":["stop"]}`))
	assert.EqualError(t, w.Read(reflect.TypeFor[doc](), ""), "stopped at .raw[0]")
}
