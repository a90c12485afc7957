package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/agentc-dev/agentc/internal/fieldpath"
)

// Case is one conformance case.
type Case struct {
	// Name is the archive's path below testdata, without .txtar.
	Name string
	// Archive is the parsed archive.
	Archive *txtar.Archive
	// WantVet is the expected "FILE:LINE RULE" set; nil when the case has
	// no want/vet.
	WantVet []string
	// Scenario and WantRun are the scenario and the expected run output
	// subset; nil when absent.
	Scenario []byte
	WantRun  any
	// WantProve is the set of invariants a bounded exploration of the
	// policy must find violated (empty: it proves clean); nil when the case
	// has no want/prove. ProveK is the exploration's depth.
	WantProve []string
	ProveK    int
	// Baseline is set when the case has baseline/ files: the policy
	// deployed before, vetted against as agentc vet -baseline does.
	Baseline bool
}

// DefaultProveK is the depth of a want/prove case without a k= line.
const DefaultProveK = 3

// Load reads every case below dir.
func Load(dir string) ([]*Case, error) {
	var cases []*Case
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".txtar" {
			return err
		}
		c, err := ParseFile(path, dir)
		if err != nil {
			return err
		}
		cases = append(cases, c)
		return nil
	})
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	return cases, err
}

// ParseFile reads one case.
func ParseFile(path, root string) (*Case, error) {
	a, err := txtar.ParseFile(path)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(root, path)
	c := &Case{Name: strings.TrimSuffix(filepath.ToSlash(rel), ".txtar"), Archive: a}
	hasPolicy := false
	for _, f := range a.Files {
		switch {
		case strings.HasPrefix(f.Name, "policy/"):
			hasPolicy = true
		case strings.HasPrefix(f.Name, "baseline/"):
			c.Baseline = true
		case f.Name == "want/vet":
			c.WantVet = []string{}
			sc := bufio.NewScanner(strings.NewReader(string(f.Data)))
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if err := checkVetLine(line); err != nil {
					return nil, fmt.Errorf("%s: want/vet: %v", path, err)
				}
				c.WantVet = append(c.WantVet, line)
			}
			sort.Strings(c.WantVet)
		case f.Name == "want/prove":
			c.WantProve, c.ProveK = []string{}, DefaultProveK
			sc := bufio.NewScanner(strings.NewReader(string(f.Data)))
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				switch {
				case line == "" || strings.HasPrefix(line, "#"):
				case strings.HasPrefix(line, "k="):
					k, err := strconv.Atoi(strings.TrimPrefix(line, "k="))
					if err != nil || k < 1 || k > 6 {
						return nil, fmt.Errorf("%s: want/prove: %q: want k=N with N from 1 to 6", path, line)
					}
					c.ProveK = k
				case strings.ContainsAny(line, " \t"):
					return nil, fmt.Errorf("%s: want/prove: %q: want one invariant name per line", path, line)
				default:
					c.WantProve = append(c.WantProve, line)
				}
			}
			sort.Strings(c.WantProve)
		case f.Name == "scenario.json":
			c.Scenario = f.Data
		case f.Name == "want/run.json":
			if err := json.Unmarshal(f.Data, &c.WantRun); err != nil {
				return nil, fmt.Errorf("%s: want/run.json: %v", path, err)
			}
			if _, ok := c.WantRun.(map[string]any); !ok {
				return nil, fmt.Errorf("%s: want/run.json: want a JSON object", path)
			}
		default:
			return nil, fmt.Errorf("%s: unexpected file %q", path, f.Name)
		}
	}
	if !hasPolicy {
		return nil, fmt.Errorf("%s: no policy/ files", path)
	}
	if c.WantVet == nil && c.Scenario == nil && c.WantProve == nil {
		return nil, fmt.Errorf("%s: neither want/vet, scenario.json nor want/prove", path)
	}
	if c.Baseline && c.WantVet == nil {
		return nil, fmt.Errorf("%s: baseline/ goes with want/vet", path)
	}
	if (c.Scenario == nil) != (c.WantRun == nil) {
		return nil, fmt.Errorf("%s: scenario.json and want/run.json go together", path)
	}
	return c, nil
}

func checkVetLine(line string) error {
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return fmt.Errorf("%q: want FILE:LINE RULE", line)
	}
	i := strings.LastIndexByte(fields[0], ':')
	if i < 0 {
		return fmt.Errorf("%q: want FILE:LINE RULE", line)
	}
	if _, err := strconv.Atoi(fields[0][i+1:]); err != nil {
		return fmt.Errorf("%q: bad line number", line)
	}
	return nil
}

// Extract writes the policy files (and the baseline's) into dir and
// returns the policy directory; the baseline's is beside it, "baseline".
func (c *Case) Extract(dir string) (string, error) {
	for _, f := range c.Archive.Files {
		if !strings.HasPrefix(f.Name, "policy/") && !strings.HasPrefix(f.Name, "baseline/") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "policy"), nil
}

// Subset reports where got differs from the expected subset want: every
// field of a want object must be present and match in got, except that a
// want of null or of an empty list also matches a field got leaves out (a
// run's result omits what did not happen: no requests, no tool calls, no
// error), so that a want can assert an absence; lists match element by
// element with equal lengths; numbers compare as float64. It returns ""
// when got contains want, else the first of Differences.
func Subset(want, got any, path string) string {
	if d := Differences(want, got, path); len(d) > 0 {
		return d[0]
	}
	return ""
}

// Differences reports every place where got differs from the expected
// subset want (see Subset), an object's fields in the order of their names;
// a list of another length is one difference, its elements not compared.
func Differences(want, got any, path string) []string {
	var out []string
	differences(want, got, path, &out)
	return out
}

func differences(want, got any, path string, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: want an object, got %s", orRoot(path), describe(got)))
			return
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok && absence(w[k]) {
				continue
			}
			if !ok {
				*out = append(*out, fmt.Sprintf("%s: missing", orRoot(fieldpath.Join(path, k))))
				continue
			}
			differences(w[k], gv, fieldpath.Join(path, k), out)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: want a list, got %s", orRoot(path), describe(got)))
			return
		}
		if len(g) != len(w) {
			*out = append(*out, fmt.Sprintf("%s: want %d elements, got %d: %s", orRoot(path), len(w), len(g), describe(got)))
			return
		}
		for i := range w {
			differences(w[i], g[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		if !equalValues(want, got) {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", orRoot(path), describe(want), describe(got)))
		}
	}
}

// absence reports whether a want value asserts that nothing is there: null
// or an empty list.
func absence(w any) bool {
	if w == nil {
		return true
	}
	l, ok := w.([]any)
	return ok && len(l) == 0
}

func orRoot(p string) string {
	if p == "" {
		return "$"
	}
	if p[0] == '[' {
		return "$" + p
	}
	return "$." + p
}

// equalValues reports whether two scalars are equal, numbers as the
// numbers they write (1 and 1.0 are equal), exactly: a json.Number or an
// int64 above 2^53 is not its float64 neighbour.
func equalValues(want, got any) bool {
	w, wok := number(want)
	g, gok := number(got)
	if wok && gok {
		return w.Cmp(g) == 0
	}
	return reflect.DeepEqual(want, got)
}

// number returns v when it is a number, to 512 bits: exact for any number a
// run holds (an int64, a float64's decimal), and bounded whatever exponent
// a want writes.
func number(v any) (*big.Float, bool) {
	var text string
	switch x := v.(type) {
	case int:
		text = strconv.Itoa(x)
	case int64:
		text = strconv.FormatInt(x, 10)
	case float64:
		// The shortest decimal that reads back as x: the number written.
		text = strconv.FormatFloat(x, 'g', -1, 64)
	case json.Number:
		text = string(x)
	default:
		return nil, false
	}
	f, ok := new(big.Float).SetPrec(512).SetString(text)
	return f, ok
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}
