package serve

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsTableMatchesRegistry holds the Metrics table of
// docs/serve.md to the collectors the server registers: every metric the
// table names is registered with the labels it gives, and every metric
// registered is in the table.
func TestMetricsTableMatchesRegistry(t *testing.T) {
	doc, err := os.ReadFile("../docs/serve.md")
	require.NoError(t, err)
	rowRE := regexp.MustCompile("(?m)^\\| `(agentc_[a-z_]+)` \\|([^|]*)\\|")
	documented := map[string][]string{}
	for _, m := range rowRE.FindAllStringSubmatch(string(doc), -1) {
		labels := []string{}
		for l := range strings.SplitSeq(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		documented[m[1]] = labels
	}
	require.NotEmpty(t, documented, "the metrics table of docs/serve.md")

	m, err := newMetrics(prometheus.NewRegistry(), func() int64 { return 0 }, &settlements{})
	require.NoError(t, err)
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	registered := map[string][]string{}
	for _, c := range m.own {
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			p := descRE.FindStringSubmatch(d.String())
			require.NotNil(t, p, "a collector's description: %s", d)
			labels := []string{}
			if p[2] != "" {
				labels = strings.Split(p[2], ",")
			}
			slices.Sort(labels)
			registered[p[1]] = labels
		}
	}
	assert.Len(t, registered, len(m.own), "one metric per collector")
	assert.Equal(t, registered, documented, "the metrics (name: labels) registered, against the table of docs/serve.md")
}
