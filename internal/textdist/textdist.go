// Package textdist measures how far apart two names are, for the
// "did you mean" hints of the policy loader and the CEL checker.
package textdist

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Distance is the optimal string alignment distance between a and b
// (bytes): insertions, deletions, substitutions and transpositions of
// neighbours each cost 1.
func Distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Closest returns the candidate nearest to name, or "" when none is within
// a third of its length plus one edits; a candidate that differs from name
// in case only is nearest ('OK' for 'ok'). name itself is no candidate.
func Closest(name string, candidates []string) string {
	best, bestD := "", len(name)/3+2
	for _, c := range candidates {
		if c == name {
			continue
		}
		if strings.EqualFold(c, name) {
			return c
		}
		if d := Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// PathHint returns `; did you mean "DIR/NAME"?` for the entry of missing's
// directory whose name is nearest to missing's (Closest), to follow a "no
// such file or directory", or "" when none is near or the directory cannot
// be read: `; did you mean "examples/support"?` for "examples/suport".
func PathHint(missing string) string {
	dir, name := filepath.Split(missing)
	entries, err := os.ReadDir(cmp.Or(dir, "."))
	if err != nil {
		return ""
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if best := Closest(name, names); best != "" {
		return fmt.Sprintf("; did you mean %q?", dir+best)
	}
	return ""
}
