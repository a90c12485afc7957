package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each guard form bounds the size as the read needs, and the severity
// says whether something else in the predicate can decide it first.
func TestUncheckedIndexes(t *testing.T) {
	anyList := func(path, root string, vars map[string]bool) bool { return true }
	const l = "response.tool_calls"
	for _, tc := range []struct {
		src, when string
		want      []indexRead // offset left out
	}{
		{src: "l[0].name == 'a'", want: []indexRead{{list: "l", index: 0, certain: true}}},
		{src: "l[0].name == 'a' && l[0].args.x > 1.0", want: []indexRead{{list: "l", index: 0, certain: true}}},
		{src: "x == 'a' && l[0].name == 'a'", want: []indexRead{{list: "l", index: 0}}},
		{src: "size(l) > 0 && l[0].name == 'a'"},
		{src: "l[0].name == 'a' && 0 < size(l)"},
		{src: "size(l) >= 1 && l[0].name == 'a'"},
		{src: "size(l) >= 1 && l[1].name == 'a'", want: []indexRead{{list: "l", index: 1}}},
		{src: "size(l) == 2 && l[1].name == 'a'"},
		{src: "l.size() != 0 && l[0].name == 'a'"},
		{src: "!(size(l) == 0) && l[0].name == 'a'"},
		{src: "!(size(l) == 0 || x) && l[0].name == 'a'"},
		{src: "size(l) <= 1 || l[1].name == 'a'"},
		{src: "!(size(l) > 1) || l[1].name == 'a'"},
		{src: "size(l) < 1 || l[1].name == 'a'", want: []indexRead{{list: "l", index: 1}}},
		{src: "size(l) > 0 ? l[0].name == 'a' : false"},
		{src: "size(l) == 0 ? false : l[0].name == 'a'"},
		{src: "x ? l[0].name == 'a' : false", want: []indexRead{{list: "l", index: 0}}},
		{src: "l.exists(c, c.name == 'a') && l[0].name == 'a'"},
		{src: "!l.all(c, c.name == 'a') && l[0].name == 'a'"},
		{src: "size(m) > 0 && l[0].name == 'a'", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[?0].name.orValue('') == 'a'"},
		{src: "l[size(l) - 1].name == 'a'"},
		{src: "l.exists(l, l[0] == 'a')", want: []indexRead{{list: "l", index: 0}}},
		{src: "size(l) > 0 && ms.exists(l, l[0] == 'a')", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "size(l) > 0"},
		{src: "l[0].name == 'a'", when: "l != []", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "'a' in l.map(c, c.name)", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "l.exists_one(c, c.name == 'a')", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "l.filter(c, c.name == 'a').size() > 0", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "m != []", want: []indexRead{{list: "l", index: 0, certain: true}}},
		{src: l + "[0].name == 'a'", want: []indexRead{{list: l, index: 0, certain: true}}},
	} {
		got := uncheckedIndexes(tc.src, tc.when, anyList)
		for i := range got {
			got[i].offset = 0
		}
		assert.Equal(t, tc.want, got, tc.src)
	}
}

// The index is reported at its constant.
func TestUncheckedIndexOffset(t *testing.T) {
	src := "x == 'a' || response.tool_calls[12].name == 'a'"
	got := uncheckedIndexes(src, "", func(string, string, map[string]bool) bool { return true })
	if assert.Len(t, got, 1) {
		assert.Equal(t, "12]", src[got[0].offset:got[0].offset+3])
	}
}
