package serve

// blocks maps the index of a stream's tool calls (or thinking blocks) to
// their blocks (or output items). A writer looks one up for each fragment
// it writes, so the lookup must not grow with the calls before it, in
// whatever order their indexes began: a response may hold many.
type blocks struct {
	at map[int]int
}

// find returns the block of index, and whether it began.
func (m *blocks) find(index int) (int, bool) {
	b, ok := m.at[index]
	return b, ok
}

// add records that index began in block.
func (m *blocks) add(index, block int) {
	if m.at == nil {
		m.at = map[int]int{}
	}
	m.at[index] = block
}

// any reports whether an index began.
func (m *blocks) any() bool { return len(m.at) > 0 }
