package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileCase is one hostile input: files to lay out, the command to run
// in a child process, and what must come of it.
// grounding is a policy whose grounding renders with template (CUE string
// escapes already applied by the caller).
func grounding(template string) map[string]string {
	return map[string]string{"p/p.cue": "package p\n\ngrounding: render: template: \"" + template + "\"\n"}
}

type hostileCase struct {
	name  string
	files map[string]string // relative path -> content
	setup func(t *testing.T, dir string)
	args  []string
	env   []string
	code  int
	out   string // regexp the combined output must match
	// maxTime and maxRSS bound the child process (defaults 5s and 256 MiB).
	maxTime time.Duration
	maxRSS  int64
}

// validPolicy is a small clean policy that hostile scenarios run against.
const validPolicy = "package p\n\nchains: chat: [{use: \"retry\"}]\n"

// TestHostileInputs runs the CLI as a child process on inputs meant to
// crash it, hang it or exhaust its memory, and checks that each ends with
// the right exit code and a diagnostic, within a time and a memory bound
// (the child's peak resident set, from its rusage).
func TestHostileInputs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the hostile-input suite needs Linux (FIFOs, /dev/zero, rusage)")
	}
	exe, err := os.Executable()
	require.NoError(t, err)

	labels := "package p\n\nx: " + strings.Repeat("a: ", 300_000) + "1\n"
	selectors := "package p\n\n_a: {}\nx: _a" + strings.Repeat(".b", 1_000_000) + "\n"
	sum := "package p\n\nx: 1" + strings.Repeat(" + 1", 500_000) + "\n"
	rangeCUE := "import \"list\"\n\nx: len(list.Range(0, 1e9, 1))\n"
	// An evaluation that overruns allocates until its deadline (1s here):
	// how much depends on the machine's speed, so its bound is wider.
	const rangeRSS = 768 << 20
	// Under AGENTC_MAX_MEMORY=128MiB the live heap is bounded; the resident
	// set adds the collector's headroom and the runtime's own.
	const liveRSS = 384 << 20
	// Reaching that heap takes CUE 9 s of a quiet core here, and more on a
	// busy one: the bound is what matters (the message names the memory
	// limit, not AGENTC_TIMEOUT's 60 s), so the time allowed stays well
	// under the timeout without racing the machine's load.
	const memoryTime = 40 * time.Second
	zero := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, name)))
		}
	}
	fifo := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			require.NoError(t, syscall.Mkfifo(filepath.Join(dir, name), 0o644))
		}
	}
	schemaPolicy := func(path string) map[string]string {
		return map[string]string{"p/p.cue": "package p\n\ntools: t: args: \"" + path + "\"\n"}
	}

	cases := []hostileCase{
		// 1. Deep label chains: refused before CUE sees them, by every
		// command that loads a policy.
		{name: "labels/vet", files: map[string]string{"p/p.cue": labels}, args: []string{"vet", "p"}, code: 1, out: `p/p\.cue:3:\d+: error cue/syntax: nesting deeper than 200 levels`},
		{name: "labels/build", files: map[string]string{"p/p.cue": labels}, args: []string{"build", "p"}, code: 1, out: `nesting deeper than 200 levels`},
		{name: "labels/explain", files: map[string]string{"p/p.cue": labels}, args: []string{"explain", "p"}, code: 1, out: `nesting deeper than 200 levels`},
		{name: "labels/run", files: map[string]string{"p/p.cue": labels, "s.json": `{"steps": []}`}, args: []string{"run", "p", "s.json"}, code: 1, out: `nesting deeper than 200 levels`},
		{name: "selectors", files: map[string]string{"p/p.cue": selectors}, args: []string{"vet", "p"}, code: 1, out: `chains more than 1000 operators and selectors`},
		{name: "operators", files: map[string]string{"p/p.cue": sum}, args: []string{"vet", "p"}, code: 1, out: `chains more than 1000 operators and selectors`},
		// 2. Special files: refused, not read.
		{name: "policy/dev-zero", setup: func(t *testing.T, dir string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "p"), 0o755))
			zero("p/p.cue")(t, dir)
		}, args: []string{"vet", "p"}, code: 1, out: `p/p\.cue:1:1: error cue/syntax: cannot read file: not a regular file`},
		{name: "policy/fifo", setup: func(t *testing.T, dir string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "p"), 0o755))
			fifo("p/p.cue")(t, dir)
		}, args: []string{"vet", "p"}, code: 1, out: `cannot read file: not a regular file`},
		{name: "scenario/dev-zero", files: map[string]string{"p/p.cue": validPolicy}, setup: zero("s.json"), args: []string{"run", "p", "s.json"}, code: 2, out: `s\.json: not a regular file`},
		{name: "scenario/fifo", files: map[string]string{"p/p.cue": validPolicy}, setup: fifo("s.cue"), args: []string{"run", "p", "s.cue"}, code: 2, out: `s\.cue: not a regular file`},
		// 3. JSON Schema paths: regular files under the policy directory.
		{name: "schema/absolute", files: schemaPolicy("/dev/zero"), args: []string{"vet", "p"}, code: 1, out: `error schema/bad-reference: cannot read JSON Schema file "/dev/zero": the path must be relative and inside the policy directory`},
		{name: "schema/parent", files: schemaPolicy("../x.json"), args: []string{"vet", "p"}, code: 1, out: `the path must be relative and inside the policy directory`},
		{name: "schema/symlink-out", files: schemaPolicy("z.json"), setup: zero("p/z.json"), args: []string{"vet", "p"}, code: 1, out: `the path leads out of the policy directory`},
		{name: "schema/fifo", files: schemaPolicy("f.json"), setup: fifo("p/f.json"), args: []string{"vet", "p"}, code: 1, out: `cannot read JSON Schema file "f.json": not a regular file`},
		{name: "schema/large", files: schemaPolicy("big.json"), setup: func(t *testing.T, dir string) {
			big := `{"description": "` + strings.Repeat("x", 2<<20) + `"}`
			require.NoError(t, os.WriteFile(filepath.Join(dir, "p/big.json"), []byte(big), 0o644))
		}, args: []string{"vet", "p"}, code: 1, out: `larger than the 1.0 MiB limit for a JSON Schema file`},
		// 4. CUE scenarios and test files: the bounds of a policy.
		{name: "scenario/range", files: map[string]string{"p/p.cue": validPolicy, "s.cue": rangeCUE}, args: []string{"run", "p", "s.cue"}, env: []string{"AGENTC_TIMEOUT=1s"}, code: 2, out: `s\.cue: evaluation did not finish within 1s`, maxRSS: rangeRSS},
		{name: "scenario/labels", files: map[string]string{"p/p.cue": validPolicy, "s.cue": strings.TrimPrefix(labels, "package p\n\n")}, args: []string{"run", "p", "s.cue"}, code: 2, out: `s\.cue:1:\d+: nesting deeper than 200 levels`},
		{name: "scenario/large", files: map[string]string{"p/p.cue": validPolicy, "s.json": `{"steps": [], "x": "` + strings.Repeat("x", 5<<20) + `"}`}, args: []string{"run", "p", "s.json"}, code: 2, out: `s\.json: file is 5\.0 MiB, larger than the 4\.0 MiB limit`},
		{name: "testfile/range", files: map[string]string{"p/p.cue": validPolicy, "p/p_test.cue": rangeCUE}, args: []string{"test", "p"}, env: []string{"AGENTC_TIMEOUT=1s"}, code: 2, out: `p_test\.cue: evaluation did not finish within 1s`, maxRSS: rangeRSS},
		// The live heap is bounded too, whatever the deadline.
		{name: "policy/range-memory", files: map[string]string{"p/p.cue": "package p\n\n" + rangeCUE}, args: []string{"vet", "p"}, env: []string{"AGENTC_TIMEOUT=60s", "AGENTC_MAX_MEMORY=128MiB"}, code: 2, out: `agentc: the evaluation holds more than 128 MiB of memory \(AGENTC_MAX_MEMORY\)`, maxRSS: liveRSS, maxTime: memoryTime},
		{name: "scenario/range-memory", files: map[string]string{"p/p.cue": validPolicy, "s.cue": rangeCUE}, args: []string{"run", "p", "s.cue"}, env: []string{"AGENTC_TIMEOUT=60s", "AGENTC_MAX_MEMORY=128MiB"}, code: 2, out: `holds more than 128 MiB of memory`, maxRSS: liveRSS, maxTime: memoryTime},
		{name: "policy/range", files: map[string]string{"p/p.cue": "package p\n\n" + rangeCUE}, args: []string{"vet", "p"}, env: []string{"AGENTC_TIMEOUT=1s"}, code: 1, out: `error cue/syntax: policy evaluation did not finish within 1s`, maxRSS: rangeRSS},

		// Render templates whose rendering the items would not bound.
		{name: "grounding/range-count", files: grounding(`{{range len (printf \"%1000s\" \"\")}}{{range len (printf \"%1000s\" \"\")}}{{range len (printf \"%1000s\" \"\")}}{{end}}{{end}}{{end}}`), args: []string{"vet", "p"}, code: 1, out: `p/p\.cue:3:\d+: error schema/invalid-value: grounding\.render\.template: template: range only over \.Items`},
		{name: "grounding/recursion", files: grounding(`{{define \"a\"}}{{if .}}{{template \"a\" (slice . 1)}}{{template \"a\" (slice . 1)}}{{end}}{{end}}{{template \"a\" .Items}}`), args: []string{"vet", "p"}, code: 1, out: `template: \{\{template\}\} and \{\{block\}\} are not allowed`},
		{name: "grounding/doubling", files: grounding(`{{$a := .Query}}` + strings.Repeat(`{{$a = print $a $a}}`, 28)), args: []string{"vet", "p"}, code: 1, out: `template: assigning a variable again \(=\) is not allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runHostile(t, exe, tc)
		})
	}
}

func runHostile(t *testing.T, exe string, tc hostileCase) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range tc.files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	if tc.setup != nil {
		tc.setup(t, dir)
	}
	maxTime, maxRSS := tc.maxTime, tc.maxRSS
	if maxTime == 0 {
		maxTime = 5 * time.Second
	}
	if maxRSS == 0 {
		maxRSS = 256 << 20
	}
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: exe, Args: append([]string{"agentc"}, tc.args...), Dir: dir,
		Env: append(os.Environ(), tc.env...), Stdout: &out, Stderr: &out}
	// A child that overruns is killed well after its bound, so that the
	// failure reports the overrun instead of hanging the suite.
	start := time.Now()
	require.NoError(t, cmd.Start())
	timer := time.AfterFunc(4*maxTime, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	elapsed := time.Since(start)
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	t.Logf("exit %d in %s, peak RSS %d MiB", code, elapsed.Round(time.Millisecond), rss>>20)
	assert.Equal(t, tc.code, code, "exit code; output:\n%s", out.String())
	assert.Regexp(t, regexp.MustCompile(tc.out), out.String())
	assert.NotContains(t, out.String(), "goroutine ", "a crash trace")
	assert.Less(t, elapsed, maxTime, "time bound")
	assert.Less(t, rss, maxRSS, "memory bound (peak RSS)")
}
