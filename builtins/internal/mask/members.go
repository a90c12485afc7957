package mask

import (
	"sort"
	"strings"
)

// memberSeps join a key and its value as the model reads an object's member: `"password":
// "hunter2"`, and run together, for a value whose start is written in its key
// (`{"password=hun": "ter2"}`, a key cut in two over a key and its value), as the strings of
// an array are read run together.
var memberSeps = [...]string{`": `, ""}

// memberProbes stand for a value after a key, one for each of memberSeps: letters, digits and
// "=", which a rule that starts with a key word ("password", "api_key",
// "aws_secret_access_key") takes for the secret it masks, and which holds no run of base64
// long enough to be decoded (the probe costs one plain reading); and, run together with the
// key, letters and digits alone, which a key the value goes on ("sk-proj-AbCd") runs on into.
var memberProbes = [...]string{strings.Repeat("Aa0=", 11), strings.Repeat("Zz9", 15)}

// keyReading is what the reading of a key with the probe found: whether an item runs from the
// key into a value (runs), and, when the masked part of one starts in the key (the start of a
// key cut in two), where, and its placeholder (cut is -1 without one).
type keyReading struct {
	runs bool
	cut  int
	with string
}

// Members returns the functions jsonvalue.MapTextReaders reads an object's members with
// (jsonvalue.Readers.Pair and Key): the value of a key is read after it, as the model reads
// the member (`"password": "hunter2"`, `"aws_secret_access_key": "..."`), and run together with
// it (`"password=hun"` and `"ter2"`), and an item find finds there that starts in the key and
// masks a part of the value has that part of the value replaced by its placeholder. The key is
// read by f, and, when an item read run together with the probe has its masked part start in
// the key and f masks nothing in it (`"sk-proj-AbCd"`, the start of a key the value goes on
// with), it is masked from there. Only the keys from which an item can run on into a value are
// read with their values: find is first tried on each key once, followed by the probes
// (readKeys), and a key no item runs from is not. Nil functions for a nil find.
func Members(find Find, f Func) (pair func(key, value string) (string, int), key func(string) (string, int)) {
	if find == nil {
		return nil, nil
	}
	keyed := map[string]keyReading{}
	reading := func(k string) keyReading {
		r, ok := keyed[k]
		if !ok {
			r = readKeys(find, []string{k})[0]
			keyed[k] = r
		}
		return r
	}
	pair = func(k, value string) (string, int) {
		if k == "" || value == "" || !reading(k).runs {
			return value, 0
		}
		return memberValue(find, k, value)
	}
	key = func(k string) (string, int) {
		red, n := f(k)
		if n > 0 || k == "" {
			return red, n
		}
		if r := reading(k); r.cut >= 0 {
			return k[:r.cut] + r.with, 1
		}
		return k, 0
	}
	return pair, key
}

// readKeys reads each of keys followed by the probe, after each of memberSeps, all in one
// text: each reading apart from the next by runSep.
func readKeys(find Find, keys []string) []keyReading {
	out := make([]keyReading, len(keys))
	for i := range out {
		out[i].cut = -1
	}
	n := len(memberSeps)
	text, starts := joinApart(len(keys)*n, func(b *strings.Builder, j int) {
		b.WriteString(keys[j/n])
		b.WriteString(memberSeps[j%n])
		b.WriteString(memberProbes[j%n])
	})
	for _, it := range find(text) {
		j := sort.Search(len(starts), func(j int) bool { return starts[j] > it.From }) - 1
		if j < 0 {
			continue
		}
		key, sep, r := keys[j/n], memberSeps[j%n], &out[j/n]
		from, start := it.From-starts[j], starts[j]+len(key)+len(sep)
		if from >= len(key) || it.End <= start {
			continue
		}
		r.runs = true
		if at := it.Start - starts[j]; sep == "" && at < len(key) && (r.cut < 0 || at < r.cut) {
			r.cut, r.with = max(at, 0), it.With
		}
	}
	return out
}

// joinApart returns the n texts write writes, each apart from the next by runSep, and where
// each starts.
func joinApart(n int, write func(b *strings.Builder, i int)) (string, []int) {
	var b strings.Builder
	starts := make([]int, n)
	for i := range n {
		if i > 0 {
			b.WriteString(runSep)
		}
		starts[i] = b.Len()
		write(&b, i)
	}
	return b.String(), starts
}

// memberValue returns value with the items find finds in key and value read as a member (after
// each of memberSeps) that start in the key and mask a part of the value masked, and their
// number.
func memberValue(find Find, key, value string) (string, int) {
	var edits []edit
	for _, sep := range memberSeps {
		start := len(key) + len(sep)
		for _, it := range find(key + sep + value) {
			if it.From < len(key) && it.End > start && it.End <= start+len(value) {
				edits = append(edits, edit{max(it.Start-start, 0), it.End - start, it.With})
			}
		}
	}
	if len(edits) == 0 {
		return value, 0
	}
	edits = mergeEdits(edits)
	var b strings.Builder
	last := 0
	for _, e := range edits {
		b.WriteString(value[last:e.start])
		b.WriteString(e.with)
		last = e.end
	}
	b.WriteString(value[last:])
	return b.String(), len(edits)
}

// cutInMembers reports whether a member of a JSON text (readJSON) holds an item that runs from
// its key into its value, as Members reads it. The keys are first read with the probes all in
// one reading (readKeys), and only the members of a key an item runs from are read, one by
// one.
func cutInMembers(members []jsonMember, find Find) bool {
	if len(members) == 0 {
		return false
	}
	var keys []string
	index := map[string]int{}
	for _, m := range members {
		if _, ok := index[m.key]; !ok {
			index[m.key] = len(keys)
			keys = append(keys, m.key)
		}
	}
	readings := readKeys(find, keys)
	for _, m := range members {
		if readings[index[m.key]].runs {
			if _, n := memberValue(find, m.key, m.value); n > 0 {
				return true
			}
		}
	}
	return false
}
