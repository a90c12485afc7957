package pii

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nyaruka/phonenumbers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/cputime"
)

// worstShapes builds texts of about n bytes in the shapes that cost the scanner most (a
// tool's hex dumps, tables of numbers, digit runs, digits joined by every separator a phone
// number is written with, base64) and in ordinary ones (prose, JSON log lines). The bytes
// are pseudo-random from a fixed seed, so a run is repeatable.
func worstShapes(n int) map[string]string {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, n/3+16)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	fill := func(line func(i int) string) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			b.WriteString(line(i))
		}
		return b.String()
	}
	hexBytes := func(p []byte, sep string) string {
		parts := make([]string, len(p))
		for i, c := range p {
			parts[i] = fmt.Sprintf("%02x", c)
		}
		return strings.Join(parts, sep)
	}
	seps := []string{" ", "-", ".", "/", " - ", " / ", "- ", " -", "(", ")", ") "}
	return map[string]string{
		"xxd": fill(func(i int) string {
			p := data[(i*16)%(len(data)-16):][:16]
			groups := make([]string, 8)
			for g := range groups {
				groups[g] = hexBytes(p[2*g:2*g+2], "")
			}
			return fmt.Sprintf("%08x: %s  %s\n", i*16, strings.Join(groups, " "), printable(p))
		}),
		"hexdump -C": fill(func(i int) string {
			p := data[(i*16)%(len(data)-16):][:16]
			return fmt.Sprintf("%08x  %s  %s  |%s|\n", i*16, hexBytes(p[:8], " "), hexBytes(p[8:], " "), printable(p))
		}),
		"od": fill(func(i int) string {
			p := data[(i*16)%(len(data)-16):][:16]
			words := make([]string, 8)
			for w := range words {
				words[w] = fmt.Sprintf("%06o", int(p[2*w])|int(p[2*w+1])<<8)
			}
			return fmt.Sprintf("%07o %s\n", i*16, strings.Join(words, " "))
		}),
		"column of numbers": fill(func(int) string { return fmt.Sprintf("%d\n", rng.IntN(1_000_000_000)) }),
		"numeric csv": fill(func(i int) string {
			return fmt.Sprintf("%d,%d,%d.%02d,%d,%d\n", i, rng.IntN(100000), rng.IntN(10000), rng.IntN(100), rng.IntN(1_000_000), rng.IntN(1000))
		}),
		"long digit runs": fill(func(int) string {
			var b strings.Builder
			for range 200 {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
			return b.String() + " "
		}),
		"separated digits": fill(func(i int) string {
			return fmt.Sprintf("%d%s%d%s%d ", rng.IntN(1000), seps[i%len(seps)], rng.IntN(1000), seps[(i/len(seps))%len(seps)], rng.IntN(10000))
		}),
		"single digits separated": fill(func(i int) string {
			return fmt.Sprintf("%d%s", rng.IntN(10), seps[rng.IntN(len(seps))])
		}),
		"base64": fill(func(i int) string {
			return base64.StdEncoding.EncodeToString(data[(i*48)%(len(data)-48):][:48]) + "\n"
		}),
		"prose": fill(func(int) string {
			return "The order shipped on time and the customer was told about the delay in the warehouse; version 1.2.3 is fine. "
		}),
		"json log": fill(func(i int) string {
			b, _ := json.Marshal(map[string]any{"ts": "2024-05-01T12:00:00Z", "level": "info", "msg": "request served",
				"status": 200, "latency_ms": rng.IntN(900), "path": "/v1/orders/" + fmt.Sprint(rng.IntN(100000)), "bytes": rng.IntN(1 << 20)})
			return string(b) + "\n"
		}),
	}
}

// printable renders p as a hex dump's text column does.
func printable(p []byte) string {
	out := make([]byte, len(p))
	for i, c := range p {
		out[i] = '.'
		if c >= 0x20 && c < 0x7f {
			out[i] = c
		}
	}
	return string(out)
}

// BenchmarkPIIWorstCase reads 64 KB of each shape of worstShapes with action "block"
// (Find) and "redact" (Redact), with the default regions and with regions set.
func BenchmarkPIIWorstCase(b *testing.B) {
	shapes := worstShapes(64 << 10)
	for _, cfg := range []struct {
		name    string
		regions []string
	}{{"default", nil}, {"regions=DE,FR", []string{"DE", "FR"}}} {
		s, err := New(Config{Regions: cfg.regions})
		require.NoError(b, err)
		for _, name := range sortedKeys(shapes) {
			text := shapes[name]
			b.Run(cfg.name+"/block/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					s.Find(text)
				}
			})
			b.Run(cfg.name+"/redact/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					s.Redact(text)
				}
			})
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestRegionScreenRulesOutOnlyInvalid: a candidate the screen rules out for a region is
// never one the parse accepts for it (valid nationally and with the national prefix its
// format requires, or dialled with its international call prefix), for every region with numbering metadata, on random digits of the lengths
// a candidate has, written plain and after the region's trunk prefix, its country code,
// both, or a trunk prefix and a carrier code (Brazil's "0 15").
func TestRegionScreenRulesOutOnlyInvalid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	screened := 0
	for _, r := range sortedRegions() {
		sc := screenFor(regionMetadata()[r])
		if sc == nil {
			continue
		}
		for range 300 {
			var b strings.Builder
			md := regionMetadata()[r]
			cc := strconv.Itoa(int(md.GetCountryCode()))
			b.WriteString([]string{"", "", md.GetNationalPrefix(), cc, cc + md.GetNationalPrefix(), "0", "00", "1",
				"0" + strconv.Itoa(10+rng.IntN(90))}[rng.IntN(9)]) // a trunk prefix and a carrier code
			for range minNationalDigits + rng.IntN(maxPhoneDigits-minNationalDigits+1) {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
			ds := b.String()
			if len(ds) > maxPhoneDigits || !sc.rulesOut(ds) {
				continue
			}
			screened++
			n, err := phonenumbers.ParseAndKeepRawInput(ds, r)
			if err != nil {
				continue
			}
			assert.Equal(t, phonenumbers.GetCountryCodeForRegion(r), int(n.GetCountryCode()), "%s %s", r, ds)
			assert.False(t, phonenumbers.IsValidNumberForRegion(n, r) && phonenumbers.IsNationalPrefixPresentIfRequired(n), "%s %s", r, ds)
		}
	}
	assert.Greater(t, screened, 1000)
}

func sortedRegions() []string {
	var out []string
	for r := range phonenumbers.GetSupportedRegions() {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// TestWorstShapesStayLinear: the shapes that cost the scanner most (a text of phone-shaped
// digit groups, hex dumps) are read in time proportional to their length: four times as
// much text takes under six times as long, with action "block" (Find) and "redact"
// (Redact). The texts are fixed (worstShapes draws from a fixed seed); each time is the best
// of three readings, and a pair is measured again, up to three times, when another process
// slowed one of them down (a quadratic reading fails every time).
func TestWorstShapesStayLinear(t *testing.T) {
	s := newScanner(t)
	small, large := worstShapes(16<<10), worstShapes(64<<10)
	for _, name := range []string{"separated digits", "od", "xxd", "hexdump -C"} {
		for action, read := range map[string]func(string){
			"block":  func(text string) { s.Find(text) },
			"redact": func(text string) { s.Redact(text) },
		} {
			t.Run(name+"/"+action, func(t *testing.T) {
				run := func(text string) time.Duration {
					best := time.Duration(1 << 62)
					for range 3 {
						best = min(best, cputime.Of(func() { read(text) }))
					}
					return best
				}
				run(small[name]) // warm up
				var a, b time.Duration
				for range 3 {
					if a, b = run(small[name]), run(large[name]); b < 6*a+20*time.Millisecond {
						break
					}
				}
				assert.Less(t, b, 6*a+20*time.Millisecond, "16 KB took %v, 64 KB %v", a, b)
			})
		}
	}
}
