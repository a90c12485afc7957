// Command agentc checks, compiles, explains and runs agentc policies.
//
//	agentc vet     [-format text|json|sarif] [-json] [-strict] [-rules] [-baseline OLD] PATH...
//	agentc build   [-o FILE] [-check PLAN] PATH
//	agentc explain [-format text|dot|mermaid] PATH
//	agentc prove   [-k N] [-maxstates N] [-timeout D] [-json] [-o DIR] PATH...
//	agentc run     [-json] [-trace] POLICY SCENARIO
//	agentc test    [-run REGEX] [-v] PATH...
//	agentc serve   [-listen ADDR] [-watch D] [-grace D] [-drain D] [-idle D] [-maxbody N] [-maxmessages N] [-maxparts N] [-maxtoolcalls N] [-maxinflight N] [-maxinflighttenant N] [-maxinflightbytes N] [-maxinflightbytestenant N] [-maxresult N] [-maxruns N] [-maxsessions N] [-log text|json] [-metrics ADDR] [-allowreset] [-allowhost NAME]... [-cacheusage auto|report|withhold] [-keyless] POLICY|plan.json
//	agentc mcp-tools [-o FILE] [-package NAME] POLICY [SERVER...] | -url URL [-header 'NAME: VALUE']...
//	agentc version
//
// Exit codes: 0 ok, 1 problems found, 2 usage or I/O failure, 3 a prove
// stopped by -maxstates or -timeout before it finished (README.md lists
// which).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/agentc-dev/agentc/internal/initgc"
	"github.com/agentc-dev/agentc/internal/textdist"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "v0.1.0-dev"

// usageHead and usageTail frame the command list of the usage text, which
// is generated from the command table so that it matches each command's
// own flags.
const usageHead = `agentc compiles declarative middleware policies for LLM agents.

Usage:
`

const usageTail = `
PATH is a directory holding one CUE package, or .cue files of one package;
DIR/... walks every policy directory below DIR.
agentc help CMD (or agentc CMD -h) prints a command's flags.
`

// usage returns the usage text: one line per command, its synopsis and
// what it does (on the next line, in the same column, after a synopsis too
// long for the column).
func usage() string {
	const width = 51
	var b strings.Builder
	b.WriteString(usageHead)
	for _, c := range commands {
		line := "agentc " + fmt.Sprintf("%-8s", c.name+" ") + c.synopsis
		if len(line) > width {
			line += "\n  " + strings.Repeat(" ", width)
		}
		fmt.Fprintf(&b, "  %s\n", strings.TrimRight(fmt.Sprintf("%-*s %s", width, line, c.summary), " "))
	}
	b.WriteString(usageTail)
	return b.String()
}

// exit codes
const (
	exitOK       = 0
	exitProblems = 1
	exitUsage    = 2
)

type command struct {
	name string
	// synopsis is the command's flags and arguments, as its usage line and
	// the top-level usage show them.
	synopsis string
	// summary says what the command does.
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

var commands []command

func init() {
	commands = []command{
		{"vet", "[-format text|json|sarif] [-json] [-strict] [-rules] [-baseline OLD] PATH...", "check policies; exit 1 on any error (with -strict: any warning)", cmdVet},
		{"build", "[-o FILE] [-check PLAN] PATH", "compile a policy to its plan (JSON)", cmdBuild},
		{"explain", "[-format text|dot|mermaid] PATH", "show each chain and why each layer sits where it does", cmdExplain},
		{"prove", "[-k N] [-maxstates N] [-timeout D] [-json] [-o DIR] PATH...", "explore every fault path up to depth k; exit 1 on a violated invariant, 3 when a bound stopped it first", cmdProve},
		{"run", "[-json] [-trace] POLICY SCENARIO", "run a scenario against fake models and tools", cmdRun},
		{"test", "[-run REGEX] [-v] PATH...", "run a policy's test cases", cmdTest},
		{"serve", "[-listen ADDR] [-watch D] [-grace D] [-drain D] [-idle D] [-maxbody N] [-maxmessages N] [-maxparts N] [-maxtoolcalls N] [-maxinflight N] [-maxinflighttenant N] [-maxinflightbytes N] [-maxinflightbytestenant N] [-maxresult N] [-maxruns N] [-maxsessions N] [-log text|json] [-metrics ADDR] [-allowreset] [-allowhost NAME]... [-cacheusage auto|report|withhold] [-keyless] POLICY|plan.json", "serve the policy: OpenAI and Anthropic gateway, MCP proxy", cmdServe},
		{"mcp-tools", "[-o FILE] [-package NAME] POLICY [SERVER...] | -url URL [-header 'NAME: VALUE']...", "print the tools of the policy's MCP servers (or of the one at URL) as CUE tools: entries, after the policy's package clause", cmdMCPTools},
		{"version", "", "print the version", cmdVersion},
	}
}

// compileOnly lists the commands that compile a policy and end: they run
// without the garbage collector until the memory limit.
var compileOnly = map[string]bool{"vet": true, "build": true, "explain": true}

// cliEnv carries the process's streams and working directory, so that
// tests can run the CLI in-process.
type cliEnv struct {
	stdout, stderr io.Writer
	wd             string
	// timeout bounds the compilation of a policy and the evaluation of a
	// scenario or test file (AGENTC_TIMEOUT; 0: the default).
	timeout time.Duration
	// excerpts adds to each text diagnostic the source line and a caret
	// under its column; on when stderr is a terminal.
	excerpts bool
}

func main() {
	limit, err := maxMemory()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentc:", err)
		os.Exit(exitUsage)
	}
	if len(os.Args) > 1 && os.Args[1] != "serve" {
		// A long-running server holds what its traffic needs; every other
		// command evaluates files and ends, under a bound on its live heap.
		go watchMemory(limit, 20*time.Millisecond, os.Stderr, os.Exit)
		if os.Getenv("GOMEMLIMIT") == "" {
			// Collect harder as the heap nears the bound, so that the live
			// heap, not garbage, decides when the watchdog fires.
			debug.SetMemoryLimit(limit + limit/2)
		}
	}
	compile := len(os.Args) > 1 && compileOnly[os.Args[1]]
	if !compile {
		// The collector was off while the packages initialized.
		initgc.Restore()
	}
	if compile && os.Getenv("GOGC") == "" {
		// Compiling a policy is one short burst of allocation: collecting
		// garbage during it costs a fifth of a vet. The memory limit
		// (GOMEMLIMIT, else 512 MiB, or 1.5 times the live-heap bound when
		// that is lower) still collects for a large policy.
		debug.SetGCPercent(-1)
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(min(512<<20, limit+limit/2))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs agentc with args and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	wd, _ := os.Getwd()
	env := &cliEnv{stdout: stdout, stderr: stderr, wd: wd, excerpts: isTerminal(stderr)}
	if v := os.Getenv("AGENTC_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "agentc: AGENTC_TIMEOUT=%q: want a positive duration such as 10s\n", v)
			return exitUsage
		}
		env.timeout = d
	}
	if len(args) == 2 && args[0] == "help" {
		// agentc help CMD: the command's usage, as agentc CMD -h.
		args = []string{args[1], "-h"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage())
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
		names[i] = c.name
	}
	hint := ""
	if near := textdist.Closest(args[0], names); near != "" {
		hint = fmt.Sprintf("; did you mean %q?", near)
	}
	fmt.Fprintf(stderr, "agentc: unknown command %q%s\n\n%s", args[0], hint, usage())
	return exitUsage
}

// newFlags returns the flag set of the named command, which reports usage
// errors on stderr with the command's synopsis.
func newFlags(env *cliEnv, name string) *flag.FlagSet {
	synopsis := ""
	for _, c := range commands {
		if c.name == name {
			synopsis = c.synopsis
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, strings.TrimRight("usage: agentc "+name+" "+synopsis, " "))
		printFlags(env.stderr, fs, synopsis)
	}
	return fs
}

// printFlags prints the flags of fs as flag.PrintDefaults does, but names
// each flag's value as synopsis does (-format text|json|sarif, -grace D)
// rather than by its Go type.
func printFlags(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(f)
		if p := synopsisPlaceholder(synopsis, f.Name); p != "" {
			placeholder = p
		}
		line := "  -" + f.Name
		if placeholder != "" {
			line += " " + placeholder
		}
		if len(line) <= 4 {
			line += "\t" // the usage on the same line, as flag does
		} else {
			line += "\n    \t"
		}
		line += strings.ReplaceAll(usage, "\n", "\n    \t")
		switch {
		case isZeroDefault(f):
		case fmt.Sprintf("%T", f.Value) == "*flag.stringValue":
			line += fmt.Sprintf(" (default %q)", f.DefValue)
		default:
			line += " (default " + f.DefValue + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// synopsisPlaceholder returns what synopsis writes after -name: "D" for
// "[-grace D]", "text|json" for "[-log text|json]", "'NAME: VALUE'" for
// "[-header 'NAME: VALUE']", "" for a boolean flag or a flag it leaves out.
func synopsisPlaceholder(synopsis, name string) string {
	m := regexp.MustCompile(`(?:^|[\[ |])-` + regexp.QuoteMeta(name) + `( '[^']*'| [^\s\]\[-][^\s\]]*)?(?:\]|\s|$)`).FindStringSubmatch(synopsis)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

// isZeroDefault reports whether f's default is its type's zero value, which
// flag.PrintDefaults leaves out.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "0s", "false":
		return true
	}
	return false
}

// parseFlags parses args; ok is false with the exit code to return. Flags
// may follow the paths (`agentc vet p -json`): they are moved in front, the
// value of a non-boolean flag with them; "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(permuteFlags(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// permuteFlags moves the flags in args in front of the positional
// arguments.
func permuteFlags(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // Parse reports it
		}
		if bf, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool && bf.IsBoolFlag() {
			continue
		}
		if i+1 == len(args) {
			// The flag lacks its value: Parse reports it, rather than
			// taking "--" as the value.
			return flags
		}
		flags = append(flags, args[i+1])
		i++
	}
	return append(append(flags, "--"), rest...)
}

func cmdVersion(_ context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "version")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	v, goVersion := versions()
	fmt.Fprintf(env.stdout, "agentc %s %s\n", v, goVersion)
	return exitOK
}

// versions returns agentc's version (the module's, when installed with go
// install at a version) and the Go version it was built with.
func versions() (v, goVersion string) {
	v = version
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" && strings.HasSuffix(v, "-dev") {
			v = bi.Main.Version
		}
	}
	return v, goVersion
}

// fail prints an I/O or usage failure and returns exit code 2.
func fail(env *cliEnv, format string, args ...any) int {
	fmt.Fprintf(env.stderr, "agentc: "+format+"\n", args...)
	return exitUsage
}
