package runtime

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// VectorIndex is the vector port of semantic caches (semantic_memoize): a
// nearest-neighbour index of embedded inputs with an opaque value each.
// Entries live in a partition (the scope: a run id, a model or tool, ...);
// a query only sees its own partition. Implementations must be safe for
// concurrent use; a store backed by Redis, pgvector or a hosted index
// implements the same two methods.
type VectorIndex interface {
	// Upsert stores value under id in partition scope with embedding vec,
	// replacing an entry with the same id. A TTL of zero means no expiry.
	Upsert(ctx context.Context, scope, id string, vec []float32, value []byte, ttl time.Duration) error
	// Query returns up to k live entries of partition scope nearest to vec,
	// best first, with their cosine similarity as Score. An empty partition
	// returns no matches and no error.
	Query(ctx context.Context, scope string, vec []float32, k int) ([]VectorMatch, error)
}

// VectorMatch is one result of VectorIndex.Query.
type VectorMatch struct {
	// ID is the entry's id.
	ID string
	// Score is the cosine similarity to the query, in [-1, 1].
	Score float64
	// Value is the entry's value.
	Value []byte
}

// Embedder turns text into a vector for a VectorIndex. Embed must be
// deterministic for a given model and safe for concurrent use. A real
// embedding model plugs in through Deps.Embedder.
type Embedder interface {
	Embed(ctx context.Context, text string) ([]float32, error)
}

// DefaultEmbedDims is the size of HashEmbedder vectors when Dims is zero.
const DefaultEmbedDims = 256

// HashEmbedder is the local default Embedder: it needs no model and no
// network. It lower-cases the text, folds runs of white space and
// punctuation into one space, hashes every character trigram (of the text
// padded with a space at each end) with FNV-1a into one of Dims buckets, adds
// or subtracts one (by a second hash bit) and normalizes the vector to unit
// length. Texts that share most trigrams get a cosine similarity close to 1;
// it sees spelling, not meaning ("cancel my order" and "stop my purchase" are
// far apart), so thresholds tuned for it are high (0.9 and above). An empty
// text embeds to the zero vector, which matches nothing.
type HashEmbedder struct {
	// Dims is the vector size (0: DefaultEmbedDims).
	Dims int
}

// Embed implements Embedder. It never fails.
func (h HashEmbedder) Embed(_ context.Context, text string) ([]float32, error) {
	dims := h.Dims
	if dims <= 0 {
		dims = DefaultEmbedDims
	}
	vec := make([]float32, dims)
	runes := normalizeForEmbedding(text)
	if len(runes) <= 2 {
		return vec, nil
	}
	var buf [12]byte
	for i := 0; i+3 <= len(runes); i++ {
		n := 0
		for _, r := range runes[i : i+3] {
			n += utf8.EncodeRune(buf[n:], r)
		}
		sum := fnv64a(buf[:n])
		bucket := sum % uint64(dims)
		if sum>>63 == 1 {
			vec[bucket]--
		} else {
			vec[bucket]++
		}
	}
	normalize(vec)
	return vec, nil
}

// fnv64a is FNV-1a (64 bit) without the allocation of hash/fnv.
func fnv64a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// normalizeForEmbedding lower-cases text and collapses separators into single
// spaces, padding it with one space at each end.
func normalizeForEmbedding(text string) []rune {
	out := make([]rune, 0, len(text)+2)
	out = append(out, ' ')
	for _, r := range strings.ToLower(text) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			out = append(out, r)
			continue
		}
		if out[len(out)-1] != ' ' {
			out = append(out, ' ')
		}
	}
	if out[len(out)-1] != ' ' {
		out = append(out, ' ')
	}
	return out
}

func normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
}

// Cosine returns the cosine similarity of a and b (0 when either is the
// zero vector or their sizes differ).
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// DefaultVectorEntries bounds each partition of a MemoryVectorIndex when
// MaxEntries is zero.
const DefaultVectorEntries = 10000

// MemoryVectorIndex is the in-memory VectorIndex: an exact (brute-force)
// scan of the query's partition, which is fast enough for the thousands of
// entries a per-process cache holds. Expired entries are skipped by queries
// and dropped on writes; when a partition is full the entry closest to
// expiry (or the oldest) is evicted. Safe for concurrent use.
type MemoryVectorIndex struct {
	// MaxEntries bounds each partition (0: DefaultVectorEntries).
	MaxEntries int

	mu    sync.RWMutex
	parts map[string]*vectorPart
	now   func() time.Time
}

type vectorPart struct {
	entries []vectorEntry
}

type vectorEntry struct {
	id    string
	vec   []float32
	norm  float64
	value []byte
	exp   time.Time // zero: never
	added time.Time
}

// NewMemoryVectorIndex returns an empty in-memory index.
func NewMemoryVectorIndex() *MemoryVectorIndex {
	return &MemoryVectorIndex{parts: map[string]*vectorPart{}, now: time.Now}
}

var (
	errEmptyVector     = errors.New("vector index: empty vector")
	errNonFiniteVector = errors.New("vector index: a component of the vector is NaN or infinite")
)

// CheckVector returns an error when a component of vec is NaN or
// infinite: its similarity to anything is not a number. A VectorIndex
// refuses such a vector in Upsert and Query.
func CheckVector(vec []float32) error {
	if !finite(vec) {
		return errNonFiniteVector
	}
	return nil
}

// finite reports whether every component of v is a finite number.
func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// Upsert implements VectorIndex. A vector with a NaN or infinite component
// is refused: its similarity to anything is not a number.
func (m *MemoryVectorIndex) Upsert(_ context.Context, scope, id string, vec []float32, value []byte, ttl time.Duration) error {
	if len(vec) == 0 {
		return errEmptyVector
	}
	if !finite(vec) {
		return errNonFiniteVector
	}
	now := m.now()
	e := vectorEntry{id: id, vec: slices.Clone(vec), norm: vecNorm(vec), value: slices.Clone(value), added: now}
	if ttl > 0 {
		e.exp = now.Add(ttl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parts == nil {
		m.parts = map[string]*vectorPart{}
	}
	p := m.parts[scope]
	if p == nil {
		p = &vectorPart{}
		m.parts[scope] = p
	}
	p.entries = slices.DeleteFunc(p.entries, func(x vectorEntry) bool {
		return x.id == id || (!x.exp.IsZero() && !now.Before(x.exp))
	})
	limit := m.MaxEntries
	if limit <= 0 {
		limit = DefaultVectorEntries
	}
	if len(p.entries) >= limit {
		victim := 0
		for i, x := range p.entries {
			if evictBefore(x, p.entries[victim]) {
				victim = i
			}
		}
		p.entries = slices.Delete(p.entries, victim, victim+1)
	}
	p.entries = append(p.entries, e)
	return nil
}

// evictBefore orders eviction candidates: expiring entries first (soonest
// first), then the oldest.
func evictBefore(a, b vectorEntry) bool {
	switch {
	case !a.exp.IsZero() && b.exp.IsZero():
		return true
	case a.exp.IsZero() && !b.exp.IsZero():
		return false
	case !a.exp.IsZero() && !a.exp.Equal(b.exp):
		return a.exp.Before(b.exp)
	}
	return a.added.Before(b.added)
}

// Query implements VectorIndex. A query vector with a NaN or infinite
// component is an error. Scores are within [-1, 1]: one the fast float32
// dot product got out of range (it overflowed on huge components) is
// computed again in float64.
func (m *MemoryVectorIndex) Query(_ context.Context, scope string, vec []float32, k int) ([]VectorMatch, error) {
	if k <= 0 {
		return nil, nil
	}
	if !finite(vec) {
		return nil, errNonFiniteVector
	}
	qn := vecNorm(vec)
	if qn == 0 {
		return nil, nil
	}
	now := m.now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.parts[scope]
	if p == nil {
		return nil, nil
	}
	var out []VectorMatch
	for i := range p.entries {
		e := &p.entries[i]
		if (!e.exp.IsZero() && !now.Before(e.exp)) || len(e.vec) != len(vec) || e.norm == 0 {
			continue
		}
		score := float64(dot32(e.vec, vec)) / (e.norm * qn)
		if !(score >= -1 && score <= 1) {
			score = max(-1, min(1, Cosine(e.vec, vec)))
		}
		if len(out) == k && score <= out[k-1].Score {
			continue
		}
		mt := VectorMatch{ID: e.id, Score: score, Value: e.value}
		if len(out) < k {
			out = append(out, mt)
		} else {
			out[k-1] = mt
		}
		// Insertion: keep out sorted best first.
		for j := len(out) - 1; j > 0 && out[j].Score > out[j-1].Score; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	for i := range out {
		out[i].Value = slices.Clone(out[i].Value)
	}
	return out, nil
}

// Len returns the number of live entries of partition scope.
func (m *MemoryVectorIndex) Len(scope string) int {
	now := m.now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.parts[scope]
	if p == nil {
		return 0
	}
	n := 0
	for _, e := range p.entries {
		if e.exp.IsZero() || now.Before(e.exp) {
			n++
		}
	}
	return n
}

// dot32 returns the dot product of two vectors of the same length, with four
// accumulators so that the loop pipelines.
func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

func vecNorm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

var (
	_ VectorIndex = (*MemoryVectorIndex)(nil)
	_ Embedder    = HashEmbedder{}
)
