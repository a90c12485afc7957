package security

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadBenignDev reads testdata/benign-dev.txt: samples separated by blank lines, lines
// starting with # left out.
func loadBenignDev(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "benign-dev.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out, cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.TrimSpace(line) == "":
			flush()
		default:
			cur = append(cur, line)
		}
	}
	flush()
	return out
}

// TestBenignDeveloperText: ordinary developer, support and business text that names system
// prompts and policies, drops earlier drafts or carries role lines is never blocked, neither
// as a user's prompt nor as a document (a tool result: an email, a ticket, a page).
func TestBenignDeveloperText(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	samples := loadBenignDev(t)
	if len(samples) < 100 {
		t.Fatalf("testdata/benign-dev.txt has %d samples, want at least 100", len(samples))
	}
	blocked := 0
	for _, s := range samples {
		if m, hit := d.Detect(s); hit {
			blocked++
			t.Errorf("blocked (%s %.1f): %q", m.PatternID, m.Score, s)
		} else if m, hit := d.DetectDocument(s); hit {
			blocked++
			t.Errorf("blocked as a document (%s %.1f): %q", m.PatternID, m.Score, s)
		}
	}
	t.Logf("%d samples, %d blocked", len(samples), blocked)
}
