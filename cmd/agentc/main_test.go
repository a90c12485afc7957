package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/initgc"
)

// initCycles is the number of collections that ran while the packages
// initialized.
var initCycles uint32

func TestMain(m *testing.M) {
	if os.Getenv(initOnlyEnv) != "" {
		os.Exit(0) // TestInitCost: the packages have initialized
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	initCycles = ms.NumGC
	// initgc turned the collector off while the packages initialized; the
	// tests run long, and the agentc command (main) sets its own policy.
	initgc.Restore()
	testscript.Main(m, map[string]func(){
		"agentc": main, // the whole process: its memory bound and GC settings too
	})
}

// TestScripts runs the CLI scripts in testdata/script. Run with
// -testwork to keep their directories; -update rewrites cmp golden files.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// garbage FILE: a .cue file of binary bytes.
			"garbage": func(ts *testscript.TestScript, neg bool, args []string) {
				b := []byte("package p\n")
				for i := 0; i < 4096; i++ {
					b = append(b, byte(i*7919%256))
				}
				ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
			},
			// bigfile FILE MIB: a valid policy padded with comments to MIB MiB.
			"bigfile": func(ts *testscript.TestScript, neg bool, args []string) {
				n, err := strconv.Atoi(args[1])
				ts.Check(err)
				b := []byte("package p\n")
				line := []byte("// " + strings.Repeat("x", 76) + "\n")
				for len(b) < n<<20 {
					b = append(b, line...)
				}
				ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
			},
			// manyerrors FILE N: a policy with N out-of-range retries.
			"manyerrors": func(ts *testscript.TestScript, neg bool, args []string) {
				n, err := strconv.Atoi(args[1])
				ts.Check(err)
				var b strings.Builder
				b.WriteString("package p\n\nchains: chat: [\n")
				for i := 0; i < n; i++ {
					b.WriteString("\t{use: \"retry\", name: \"r" + strconv.Itoa(i) + "\", max_attempts: 99},\n")
				}
				b.WriteString("]\n")
				ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(b.String()), 0o644))
			},
			// sarifvalid FILE: FILE is a SARIF log valid against the
			// official SARIF 2.1.0 JSON Schema.
			"sarifvalid": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: sarifvalid FILE")
				}
				var v any
				ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &v))
				err := sarifSchema(t).Validate(v)
				if neg && err == nil {
					ts.Fatalf("%s is a valid SARIF log", args[0])
				}
				if !neg && err != nil {
					ts.Fatalf("%s: %v", args[0], err)
				}
			},
			// nested FILE DEPTH: a policy nesting structs DEPTH deep.
			"nested": func(ts *testscript.TestScript, neg bool, args []string) {
				n, err := strconv.Atoi(args[1])
				ts.Check(err)
				src := "package p\nx: " + strings.Repeat("{a: ", n) + "1" + strings.Repeat("}", n) + "\n"
				ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(src), 0o644))
			},
		},
		Setup: func(env *testscript.Env) error {
			// The examples, for scripts that vet them.
			env.Setenv("EXAMPLES", examplesDir(t))
			return nil
		},
	})
}

// TestUsageMatchesFlags checks that the flags each command defines are the
// ones its synopsis, and so the top-level usage, lists.
func TestUsageMatchesFlags(t *testing.T) {
	var top strings.Builder
	Main(context.Background(), []string{"help"}, &strings.Builder{}, &top)
	flagRE := regexp.MustCompile(`-[a-z]+`)
	for _, c := range commands {
		if c.synopsis == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			var stderr strings.Builder
			code := Main(context.Background(), []string{c.name, "-h"}, &strings.Builder{}, &stderr)
			assert.Equal(t, exitOK, code)
			assert.Contains(t, stderr.String(), "usage: agentc "+c.name+" "+c.synopsis+"\n")
			assert.Regexp(t, `agentc `+c.name+` +`+regexp.QuoteMeta(c.synopsis)+`\s+`+regexp.QuoteMeta(c.summary), top.String())
			var defined []string
			for _, line := range strings.Split(stderr.String(), "\n") {
				if strings.HasPrefix(line, "  -") {
					defined = append(defined, flagRE.FindString(line))
				}
			}
			assert.ElementsMatch(t, defined, flagRE.FindAllString(c.synopsis, -1), "flags of %s against its synopsis %q", c.name, c.synopsis)
		})
	}
}

// TestHelpCommand: `agentc help CMD` printed the top-level usage, not the
// command's; it prints what `agentc CMD -h` prints, and an unknown command
// is a usage error naming it.
func TestHelpCommand(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			var want, got strings.Builder
			Main(context.Background(), []string{c.name, "-h"}, &strings.Builder{}, &want)
			code := Main(context.Background(), []string{"help", c.name}, &strings.Builder{}, &got)
			assert.Equal(t, exitOK, code)
			assert.Equal(t, want.String(), got.String())
		})
	}
	var stderr strings.Builder
	code := Main(context.Background(), []string{"help", "serv"}, &strings.Builder{}, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), `agentc: unknown command "serv"; did you mean "serve"?`)
}

var (
	sarifOnce     sync.Once
	sarifCompiled *jsonschema.Schema
)

// sarifSchema compiles the SARIF 2.1.0 JSON Schema the sarif package's
// tests hold.
func sarifSchema(t *testing.T) *jsonschema.Schema {
	sarifOnce.Do(func() {
		path := filepath.Join(filepath.Dir(examplesDir(t)), "compiler", "sarif", "testdata", "sarif-schema-2.1.0.json")
		c := jsonschema.NewCompiler()
		c.AssertFormat = true
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := c.AddResource("sarif-schema-2.1.0.json", f); err != nil {
			t.Fatal(err)
		}
		if sarifCompiled, err = c.Compile("sarif-schema-2.1.0.json"); err != nil {
			t.Fatal(err)
		}
	})
	return sarifCompiled
}

// TestNoCollectionDuringInit: initgc turns the collector off before the
// packages that allocate most at init (libphonenumber's metadata, the JSON
// Schema meta-schemas) run theirs, so no cycle runs before main.
func TestNoCollectionDuringInit(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the environment decides")
	}
	assert.Zero(t, initCycles, "collections during package initialization")
}

// TestCollectorOn: the test process collects garbage (initgc's init left
// it off for the whole run before TestMain restored it).
func TestCollectorOn(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the environment decides")
	}
	prev := debug.SetGCPercent(100)
	debug.SetGCPercent(prev)
	assert.Equal(t, 100, prev, "the collector's percentage during the tests")
}

// TestReadmeCommandsMatchUsage checks that the command list of the
// repository's README gives every command the synopsis its usage prints,
// so a flag added to a command does not go undocumented there.
func TestReadmeCommandsMatchUsage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(filepath.Dir(examplesDir(t)), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		line := regexp.MustCompile(`(?m)^agentc ` + regexp.QuoteMeta(c.name) + `(?: +(.*))?$`).FindSubmatch(readme)
		if !assert.NotNil(t, line, "README.md lists no agentc %s", c.name) {
			continue
		}
		if c.synopsis == "" {
			continue
		}
		assert.True(t, strings.HasPrefix(string(line[1]), c.synopsis), "README.md gives agentc %s as %q, its usage as %q", c.name, line[1], c.synopsis)
	}
	// So is the command list of the package comment.
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		assert.Regexp(t, `(?m)^//\tagentc `+regexp.QuoteMeta(c.name)+` *`+regexp.QuoteMeta(c.synopsis)+`$`, string(src), "the package comment's agentc %s", c.name)
	}
	// A synopsis line in docs/ (one starting "agentc CMD [") is held to the
	// usage too.
	docs, err := filepath.Glob(filepath.Join(filepath.Dir(examplesDir(t)), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	synopses := map[string]string{}
	for _, c := range commands {
		synopses[c.name] = c.synopsis
	}
	lineRE := regexp.MustCompile(`(?m)^agentc ([a-z-]+) (\[.*)$`)
	rowRE := regexp.MustCompile("(?m)^\\| `(-[a-z]+)[ `]")
	flagRE := regexp.MustCompile(`-[a-z]+`)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lineRE.FindAllStringSubmatch(string(b), -1) {
			synopsis, ok := synopses[m[1]]
			if assert.True(t, ok, "%s names a command agentc %s that does not exist", filepath.Base(doc), m[1]) {
				assert.True(t, strings.HasPrefix(m[2], synopsis), "%s gives agentc %s as %q, its usage as %q", filepath.Base(doc), m[1], m[2], synopsis)
			}
		}
		// A page of one command with a table of its flags lists every flag
		// the command has, and no other.
		if ms := lineRE.FindAllStringSubmatch(string(b), -1); len(ms) == 1 {
			var rows []string
			for _, r := range rowRE.FindAllStringSubmatch(string(b), -1) {
				rows = append(rows, r[1])
			}
			if len(rows) > 0 {
				assert.ElementsMatch(t, flagRE.FindAllString(synopses[ms[0][1]], -1), rows, "the flag table of %s against agentc %s's usage", filepath.Base(doc), ms[0][1])
			}
		}
	}
}

// TestDirectoryWithoutPolicyIsAUsageError: every command that takes a
// policy path exits 2 on a directory holding no policy file, as README.md
// says, agentc test included (a directory of test cases alone is no
// policy).
func TestDirectoryWithoutPolicyIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", "case.json"), []byte("{}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p_test.cue"), []byte("package p\n"), 0o644))
	for _, args := range [][]string{{"vet", dir}, {"build", dir}, {"explain", dir}, {"prove", dir}, {"test", dir}} {
		var stdout, stderr strings.Builder
		code := Main(context.Background(), args, &stdout, &stderr)
		assert.Equal(t, exitUsage, code, "agentc %s", args[0])
		assert.Contains(t, stderr.String(), "no .cue files in directory", "agentc %s", args[0])
	}
}
