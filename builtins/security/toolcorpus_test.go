package security

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toolSample is one line of testdata/tools (see its README.md).
type toolSample struct {
	Label  string `json:"label"`
	Source string `json:"source"`
	Form   string `json:"form"`
	Name   string `json:"name"`
	Text   string `json:"text"`
}

func loadTools(t *testing.T, file string) []toolSample {
	t.Helper()
	fh, err := os.Open(filepath.Join("testdata", "tools", file))
	require.NoError(t, err)
	defer fh.Close()
	var out []toolSample
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var s toolSample
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s), "%s:%d", file, line)
		out = append(out, s)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestToolDescriptions measures the detector on tool descriptions as a client's tool
// definitions carry them (read as a prompt is): poisoned ones from the public write-ups on
// MCP tool poisoning, benign ones from real MCP servers' tools/list (testdata/tools).
// The figures are in docs/detection.md.
func TestToolDescriptions(t *testing.T) {
	d, err := New(Config{})
	require.NoError(t, err)
	poisoned, benign := loadTools(t, "poisoned.jsonl"), loadTools(t, "benign.jsonl")
	require.GreaterOrEqual(t, len(poisoned), 30)
	require.GreaterOrEqual(t, len(benign), 100)
	found := 0
	for _, s := range poisoned {
		if _, ok := d.Detect(s.Text); ok {
			found++
		} else {
			t.Logf("missed (%s, %s): %.100q", s.Source, s.Name, s.Text)
		}
	}
	blocked := 0
	for _, s := range benign {
		if m, ok := d.Detect(s.Text); ok {
			blocked++
			t.Logf("false positive (%s, %s, %s %.1f): %.100q", s.Source, s.Name, m.PatternID, m.Score, s.Text)
		}
	}
	t.Logf("poisoned %d detected %d (%.1f%%), benign %d blocked %d (%.2f%%)", len(poisoned), found,
		100*float64(found)/float64(len(poisoned)), len(benign), blocked, 100*float64(blocked)/float64(len(benign)))
	assert.GreaterOrEqual(t, float64(found)/float64(len(poisoned)), 0.9)
	assert.LessOrEqual(t, float64(blocked)/float64(len(benign)), 0.01)
}
