package textdist

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"retry", "retry", 0}, {"retyr", "retry", 1}, {"retri", "retry", 1},
		{"ammount", "amount", 1}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"ammount", []string{"amount", "approved_by"}, "amount"},
		{"x", []string{"amount"}, ""},
		{"amount", []string{"amount"}, ""}, // the name itself is no suggestion
		{"trial", []string{"include_args", "sink", "trail"}, "trail"},
		{"OK", []string{"failed", "ok"}, "ok"}, // case only: too many edits for a name this short
	} {
		if got := Closest(tc.name, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", tc.name, tc.candidates, got, tc.want)
		}
	}
}
