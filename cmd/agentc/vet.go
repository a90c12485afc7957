package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/compiler/sarif"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func cmdVet(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "vet")
	asJSON := fs.Bool("json", false, "print diagnostics as a JSON array (-format json)")
	format := fs.String("format", "text", "output `format`: text (lines on standard error), json or sarif (SARIF 2.1.0; both on standard output)")
	strict := fs.Bool("strict", false, "exit 1 on warnings too")
	rules := fs.Bool("rules", false, "list every rule id with its title")
	baseline := fs.String("baseline", "", "compare with the deployed policy at `OLD` (a policy directory, .cue file or plan.json) and warn of each layer whose shared state the change leaves behind (state/reset)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch *format {
	case "text", "json", "sarif":
	default:
		fmt.Fprintf(env.stderr, "agentc vet: -format %q: want text, json or sarif\n", *format)
		return exitUsage
	}
	if *asJSON {
		if *format != "text" && *format != "json" {
			fmt.Fprintf(env.stderr, "agentc vet: -json and -format %s disagree; give one\n", *format)
			return exitUsage
		}
		*format = "json"
	}
	if *rules {
		if fs.NArg() > 0 {
			fmt.Fprintln(env.stderr, "agentc vet: -rules lists the rules and takes no paths")
			return exitUsage
		}
		return listRules(env, *format)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	policies, err := expandPaths(fs.Args())
	if err != nil {
		return fail(env, "%v", err)
	}
	var old *plan.Plan
	if *baseline != "" {
		if len(policies) != 1 {
			fmt.Fprintln(env.stderr, "agentc vet: -baseline compares one policy: give one directory, or its .cue files")
			return exitUsage
		}
		if old, err = compiler.LoadBaseline(ctx, *baseline, compiler.Options{Timeout: env.timeout}); err != nil {
			return fail(env, "-baseline: %v", err)
		}
	}
	var all dsl.Diagnostics
	for _, paths := range policies {
		c, err := compiler.Compile(ctx, paths, compiler.Options{Timeout: env.timeout})
		if err != nil {
			return fail(env, "%v", err)
		}
		c.CompareBaseline(old)
		all = append(all, c.Diagnostics...)
	}
	all = all.Relative(env.wd).Sort()
	if err := printDiagnostics(env, all, *format); err != nil {
		return fail(env, "%v", err)
	}
	errs, warns := all.Count()
	if errs > 0 || (*strict && warns > 0) {
		return exitProblems
	}
	return exitOK
}

// maxTextDiagnostics caps the text output; -json and -format sarif print
// every diagnostic.
const maxTextDiagnostics = 200

// printDiagnostics writes ds in format: "text" lines on stderr (at most
// maxTextDiagnostics, then a count of the rest), a "json" array or a
// "sarif" log on stdout.
func printDiagnostics(env *cliEnv, ds dsl.Diagnostics, format string) error {
	switch format {
	case "json":
		if ds == nil {
			ds = dsl.Diagnostics{}
		}
		return writeJSON(env.stdout, ds)
	case "sarif":
		return sarif.Write(env.stdout, ds, sarifOptions(env))
	}
	src := &sources{wd: env.wd}
	for i, d := range ds {
		if i == maxTextDiagnostics {
			_, err := fmt.Fprintf(env.stderr, "agentc: %d more diagnostics not shown (-json prints all)\n", len(ds)-i)
			return err
		}
		text := d.String()
		if env.excerpts {
			text = withExcerpt(src, d)
		}
		if _, err := fmt.Fprintln(env.stderr, text); err != nil {
			return err
		}
	}
	return nil
}

// withExcerpt formats d as Diagnostic.String does, with the source line
// and a caret under the column below the first line.
func withExcerpt(src *sources, d dsl.Diagnostic) string {
	related := d.Related
	d.Related = nil
	text := d.String()
	if ex := src.excerpt(d.Pos); ex != "" {
		text += "\n" + ex
	}
	for _, r := range related {
		text += fmt.Sprintf("\n\t%s: %s", r.Pos, r.Message)
	}
	return text
}

// writeJSON writes v as indented JSON, without HTML escaping (messages
// hold < and >).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// expandPaths groups the command-line paths into policies: a directory is
// one policy, .cue files together are one policy, and DIR/... is every
// directory below DIR that holds policy files.
func expandPaths(args []string) ([][]string, error) {
	var out [][]string
	var files []string
	for _, a := range args {
		if strings.HasSuffix(a, "/...") || a == "..." {
			root := strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/")
			if root == "" {
				root = "."
			}
			dirs, err := walkPolicyDirs(root)
			if err != nil {
				return nil, err
			}
			if len(dirs) == 0 {
				return nil, fmt.Errorf("%s: no policy directories below %s", a, root)
			}
			for _, d := range dirs {
				out = append(out, []string{d})
			}
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: no such file or directory%s", a, textdist.PathHint(a))
			}
			return nil, err
		}
		if st.IsDir() {
			out = append(out, []string{a})
		} else {
			files = append(files, a)
		}
	}
	if len(files) > 0 {
		out = append(out, files)
	}
	return out, nil
}

// walkPolicyDirs returns the directories below root holding .cue files
// other than tests. Directories named testdata, or starting with . or _,
// are skipped, as the go command does.
func walkPolicyDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.cue"))
		for _, m := range matches {
			if dsl.IsPolicyFileName(filepath.Base(m)) {
				dirs = append(dirs, path)
				break
			}
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

// sarifOptions are the options of the CLI's SARIF logs: file names are
// relative to the working directory.
func sarifOptions(env *cliEnv) sarif.Options {
	v, _ := versions()
	return sarif.Options{
		ToolVersion: v,
		SrcRoot:     env.wd,
		ReadFile: func(name string) ([]byte, error) {
			if !filepath.IsAbs(name) {
				name = filepath.Join(env.wd, name)
			}
			return dsl.ReadFile(name, dsl.MaxFileSize)
		},
	}
}

// listRules prints every rule id with its severity and title, as a table,
// as a JSON array of {"rule","severity","title"}, or as a SARIF log with
// the rules' descriptors and no results.
func listRules(env *cliEnv, format string) int {
	if format == "sarif" {
		if err := sarif.Write(env.stdout, nil, sarifOptions(env)); err != nil {
			return fail(env, "%v", err)
		}
		return exitOK
	}
	if format == "json" {
		type rule struct {
			Rule     string `json:"rule"`
			Severity string `json:"severity"`
			Title    string `json:"title"`
		}
		var out []rule
		for _, r := range compiler.Rules() {
			out = append(out, rule{r.ID, string(r.Severity), r.Title})
		}
		if err := writeJSON(env.stdout, out); err != nil {
			return fail(env, "%v", err)
		}
		return exitOK
	}
	for _, r := range compiler.Rules() {
		fmt.Fprintf(env.stdout, "%-34s %-13s %s\n", r.ID, r.Severity, r.Title)
	}
	return exitOK
}

func cmdBuild(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "build")
	out := fs.String("o", "", "write the plan to `FILE` (default: standard output)")
	check := fs.String("check", "", "compare the plan in `PLAN` with the policy's build and exit 1 naming each difference, writing nothing")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	if *check != "" && *out != "" {
		return fail(env, "build: -check and -o do not go together: -check writes nothing")
	}
	for _, a := range fs.Args() {
		if strings.HasSuffix(a, "...") {
			return fail(env, "build compiles one policy: give a directory or its .cue files, not %s", a)
		}
	}
	c, err := compiler.Compile(ctx, fs.Args(), compiler.Options{Timeout: env.timeout})
	if err != nil {
		return fail(env, "%v", err)
	}
	ds := c.Diagnostics.Relative(env.wd).Sort()
	if err := printDiagnostics(env, ds, "text"); err != nil {
		return fail(env, "%v", err)
	}
	if c.Plan == nil {
		return exitProblems
	}
	if *check != "" {
		return checkPlan(env, *check, strings.Join(fs.Args(), " "), c.Plan)
	}
	b, err := encodePlan(c)
	if err != nil {
		return fail(env, "%v", err)
	}
	if *out == "" {
		if _, err := env.stdout.Write(b); err != nil {
			return fail(env, "%v", err)
		}
		return exitOK
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return fail(env, "%v", err)
	}
	return exitOK
}
