package serve

import (
	"cmp"
	"slices"
)

// blocks maps the index of a stream's tool calls (or thinking blocks) to
// their blocks (or output items), in the order they began. A writer looks
// one up for each fragment it writes, so the lookup must not grow with the
// calls before it: a response may hold many.
type blocks struct {
	list []toolBlock
	// unsorted reports that an index began below one begun before it.
	// While none did (the calls released whole, indexed by their place;
	// thinking blocks, numbered in order), an index is found by a binary
	// search, and one above the last begins a block at once.
	unsorted bool
}

// find returns the block of index, and whether it began.
func (m *blocks) find(index int) (int, bool) {
	if !m.unsorted {
		if i, ok := slices.BinarySearchFunc(m.list, index, func(t toolBlock, x int) int { return cmp.Compare(t.call, x) }); ok {
			return m.list[i].block, true
		}
		return 0, false
	}
	for _, t := range m.list {
		if t.call == index {
			return t.block, true
		}
	}
	return 0, false
}

// add records that index began in block.
func (m *blocks) add(index, block int) {
	if n := len(m.list); n > 0 && m.list[n-1].call > index {
		m.unsorted = true
	}
	m.list = append(m.list, toolBlock{call: index, block: block})
}

// any reports whether an index began.
func (m *blocks) any() bool { return len(m.list) > 0 }
