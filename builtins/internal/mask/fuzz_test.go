package mask_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
)

// secretOrBracketed finds each "SECRET" (a value that may be cut anywhere)
// and each "<...>" of letters and line breaks (one that runs over lines),
// masked "#", which neither holds.
var secretOrBracketed = regexp.MustCompile(`SECRET|<[a-z\n]*>`)

func findSecrets(text string) []mask.Item {
	var out []mask.Item
	for _, loc := range secretOrBracketed.FindAllStringIndex(text, -1) {
		out = append(out, mask.Item{From: loc[0], To: loc[1], Start: loc[0], End: loc[1], With: "#"})
	}
	return out
}

// FuzzReadElements: the strings of an array (the input cut at each "|")
// keep their number, and no item the finder finds survives, in any
// element, in the elements read as lines or in the elements run together;
// the offsets of the items lie inside what they were found in.
func FuzzReadElements(f *testing.F) {
	for _, s := range []string{"a SECRET b|c", "ab SEC|RET c", "x SE|CR|ET", "<ab|cd>", "x|<a|b|c>|y", "SECRE|TSECRET",
		"SE|SECRET|CRET", "<a|b>|c>", "a|b", "", "|", "SECSECRET|RET", "<\n|>", "-----BEGIN|abc|END-----"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := strings.Split(s, "|")
		before := slices.Clone(in)
		out, found := mask.ReadElements(in, findSecrets)
		if !slices.Equal(in, before) {
			t.Fatalf("%q: the elements were modified: %q", before, in)
		}
		if len(out) != len(in) {
			t.Fatalf("%q: %d elements out of %d", in, len(out), len(in))
		}
		if len(found) == 0 && !slices.Equal(out, in) {
			t.Fatalf("%q: nothing found, yet %q", in, out)
		}
		lines, together := strings.Join(in, "\n"), strings.Join(in, "")
		for _, it := range found {
			text := lines
			if it.Elem >= 0 {
				if it.Elem >= len(in) {
					t.Fatalf("%q: item of element %d", in, it.Elem)
				}
				text = in[it.Elem]
			} else if len(together) > len(text) {
				text = together
			}
			if it.From < 0 || it.From > it.Start || it.Start > it.End || it.End > it.To || it.To > len(text) {
				t.Fatalf("%q: item %+v outside its text", in, it)
			}
		}
		for i, e := range out {
			if left := findSecrets(e); len(left) > 0 {
				t.Fatalf("%q: element %d is %q", in, i, e)
			}
		}
		for _, sep := range []string{"\n", ""} {
			if joined := strings.Join(out, sep); len(findSecrets(joined)) > 0 {
				t.Fatalf("%q: read joined by %q, %q holds an item", in, sep, out)
			}
		}
	})
}
