package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// initOnlyEnv, set in the environment of this test binary, makes TestMain
// exit as soon as the packages have initialized.
const initOnlyEnv = "AGENTC_TEST_INIT_ONLY"

// initBudget is what each of agentc's packages that keep tables for the
// runtime (regular expressions, Unicode tables) may allocate while it
// initializes: the tables are built on first use or compiled in, so that
// a command that does not use them (agentc vet, build, version) does not
// pay for them at start.
var initBudget = map[string]int{
	"github.com/agentc-dev/agentc/internal/credential":        4 << 10,
	"github.com/agentc-dev/agentc/builtins/internal/textnorm": 4 << 10,
	"github.com/agentc-dev/agentc/builtins/security":          4 << 10,
	"github.com/agentc-dev/agentc/compiler":                   16 << 10,
	"github.com/agentc-dev/agentc/dsl":                        64 << 10,
}

var initLine = regexp.MustCompile(`(?m)^init (\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, (\d+) allocs$`)

// TestInitCost runs this test binary with GODEBUG=inittrace=1, which
// prints what each package's initialization allocated, and checks the
// budgets above.
func TestInitCost(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), initOnlyEnv+"=1", "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	seen := map[string]bool{}
	for _, m := range initLine.FindAllStringSubmatch(string(out), -1) {
		budget, ok := initBudget[m[1]]
		if !ok {
			continue
		}
		seen[m[1]] = true
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		assert.LessOrEqual(t, n, budget, "bytes %s allocates at init (%s allocations)", m[1], m[3])
	}
	for pkg := range initBudget {
		assert.True(t, seen[pkg], "inittrace names no init of %s", pkg)
	}
}
