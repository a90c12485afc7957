// Command agentc checks, compiles, explains and runs agentc policies.
//
//	agentc vet     [-json] [-strict] [-rules] PATH...
//	agentc build   [-o plan.json] PATH
//	agentc explain [-format text|dot|mermaid] PATH
//	agentc run     [-json] [-trace] POLICY SCENARIO
//	agentc test    [-run REGEX] PATH...
//	agentc version
//
// Exit codes: 0 ok, 1 problems found, 2 usage or I/O failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "v0.1.0-dev"

const usage = `agentc compiles declarative middleware policies for LLM agents.

Usage:
  agentc vet     [-json] [-strict] [-rules] PATH...   check policies; exit 1 on any error
  agentc build   [-o FILE] PATH                       compile a policy to its plan (JSON)
  agentc explain [-format text|dot|mermaid] PATH      show each chain and why each layer sits where it does
  agentc run     [-json] [-trace] POLICY SCENARIO     run a scenario against fake models and tools
  agentc test    [-run REGEX] PATH...                 run a policy's test cases
  agentc version                                      print the version

PATH is a directory holding one CUE package, or .cue files of one package;
DIR/... walks every policy directory below DIR.
`

// exit codes
const (
	exitOK       = 0
	exitProblems = 1
	exitUsage    = 2
)

type command struct {
	name string
	run  func(ctx context.Context, env *cliEnv, args []string) int
}

var commands []command

func init() {
	commands = []command{
		{"vet", cmdVet},
		{"build", cmdBuild},
		{"explain", cmdExplain},
		{"run", cmdRun},
		{"test", cmdTest},
		{"version", cmdVersion},
	}
}

// cliEnv carries the process's streams and working directory, so that
// tests can run the CLI in-process.
type cliEnv struct {
	stdout, stderr io.Writer
	wd             string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs agentc with args and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	wd, _ := os.Getwd()
	env := &cliEnv{stdout: stdout, stderr: stderr, wd: wd}
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(stderr, "agentc: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// newFlags returns a flag set that reports usage errors on stderr.
func newFlags(env *cliEnv, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "usage: agentc %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
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
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(append(flags, "--"), rest...)
}

func cmdVersion(_ context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(env.stderr, "usage: agentc version")
		return exitUsage
	}
	v := version
	goVersion := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" && strings.HasSuffix(v, "-dev") {
			v = bi.Main.Version
		}
	}
	fmt.Fprintf(env.stdout, "agentc %s %s\n", v, goVersion)
	return exitOK
}

// fail prints an I/O or usage failure and returns exit code 2.
func fail(env *cliEnv, format string, args ...any) int {
	fmt.Fprintf(env.stderr, "agentc: "+format+"\n", args...)
	return exitUsage
}
