// Package storeaddr reads the address of a redis or postgres store without
// connecting to it: whether a postgres store could name its schema, and
// which database an address names, in words that tell two databases apart
// and never show a credential.
//
// It links no database client, so that the runtime's messages can use it;
// its tests hold Describe to the postgres client's own parser.
package storeaddr

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// setting is one keyword/value setting of a postgres connection string.
type setting struct{ Key, Value string }

// Unquoted returns err without the URL a *url.Error quotes, password
// included: its reason alone ("invalid port \":x\" after host"). Any
// other error is returned as it is.
func Unquoted(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// URLScheme returns the scheme of raw when it is a URL (scheme://...), not
// keyword/value settings, whose values may hold "://".
func URLScheme(raw string) (string, bool) {
	scheme, _, ok := strings.Cut(raw, "://")
	return scheme, ok && scheme != "" && !strings.ContainsAny(scheme, "= \t\n\r\v\f'")
}

// keywordValues reads libpq's keyword/value form: keyword = value pairs
// separated by spaces, a value in single quotes when it holds spaces, a
// backslash taking the next character as it is.
func keywordValues(s string) ([]setting, error) {
	const space = " \t\n\r\v\f"
	var out []setting
	s = strings.TrimLeft(s, space)
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, fmt.Errorf("%q is not a keyword=value setting (a postgres url is a postgres:// URL or settings such as host=db dbname=app)", firstWord(s))
		}
		key := strings.Trim(s[:eq], space)
		if i := strings.IndexAny(key, space); i >= 0 {
			return nil, fmt.Errorf("no \"=\" after %q", key[:i])
		}
		if key == "" {
			return nil, errors.New("a setting without a keyword")
		}
		s = strings.TrimLeft(s[eq+1:], space)
		var val strings.Builder
		switch {
		case s == "":
		case s[0] != '\'':
			i := 0
			for ; i < len(s) && !strings.ContainsRune(space, rune(s[i])); i++ {
				if s[i] == '\\' {
					i++
					if i == len(s) {
						break
					}
				}
				val.WriteByte(s[i])
			}
			s = strings.TrimLeft(s[min(i, len(s)):], space)
		default:
			s = s[1:]
			i := 0
			for ; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\\' {
					i++
					if i == len(s) {
						break
					}
				}
				val.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("the quoted value of %s has no closing quote", key)
			}
			s = strings.TrimLeft(s[i+1:], space)
		}
		if key == "database" {
			key = "dbname"
		}
		out = append(out, setting{key, val.String()})
	}
	return out, nil
}

// lastOfEach returns set with one setting of each keyword, where its
// first stands, holding the value of its last: the client reads a
// repeated setting so (port=5433 port=5432 connects to 5432).
func lastOfEach(set []setting) []setting {
	var out []setting
	for _, s := range set {
		if i := slices.IndexFunc(out, func(o setting) bool { return o.Key == s.Key }); i >= 0 {
			out[i].Value = s.Value
			continue
		}
		out = append(out, s)
	}
	return out
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t\n\r\v\f"); i >= 0 {
		return s[:i]
	}
	return s
}

// identifying are the settings that say which server and database an
// address names: none of them is a credential.
var identifying = []string{"host", "hostaddr", "port", "dbname", "db", "user", "service"}

// Describe names the database the server address raw names, without its
// credentials: a URL keeps its scheme, user name, host, port and path, and
// of its query only what chooses the server or the database (a redis URL's
// db, shown as its path; a postgres URL's host, port, dbname (or database,
// shown as dbname), user, service); keyword/value settings keep the same
// settings, each once, with the value of its last (as the client reads a
// repeated setting). A password, anywhere, and settings such as sslkey or
// sslpassword are dropped. ok is false for an address it cannot read.
func Describe(raw string) (string, bool) { return describe(raw, false) }

// Identity is Describe written one way for each database: the scheme's
// default port (5432 for postgres, 6379 for redis) written out, a host
// name in lower case, postgresql:// read as postgres://, a redis URL
// without a database as its database 0, and a keyword/value string's
// port=5432 left out. Two addresses of one database that Describe reads
// apart only in these read alike.
func Identity(raw string) (string, bool) { return describe(raw, true) }

// defaultPorts are the ports a scheme's client connects to when its URL
// names none.
var defaultPorts = map[string]string{"postgres": "5432", "redis": "6379", "rediss": "6379"}

// canonicalHost is host (host[:port] of a URL) with its name in lower
// case and scheme's default port written out. A list of hosts (a postgres
// URL's h1,h2) is left as it is.
func canonicalHost(scheme, host string) string {
	if host == "" || strings.Contains(host, ",") {
		return host
	}
	u := url.URL{Host: host}
	name, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = defaultPorts[scheme]
	}
	if port == "" {
		return name
	}
	return net.JoinHostPort(name, port)
}

func describe(raw string, canonical bool) (string, bool) {
	if _, isURL := URLScheme(raw); !isURL {
		set, err := keywordValues(raw)
		if err != nil || len(set) == 0 {
			return "", false
		}
		var kept []string
		for _, s := range lastOfEach(set) {
			if !slices.Contains(identifying, s.Key) || s.Key == "db" {
				continue
			}
			v := s.Value
			switch {
			case canonical && s.Key == "port" && v == defaultPorts["postgres"]:
				continue
			case canonical && s.Key == "host" && !strings.HasPrefix(v, "/"):
				v = strings.ToLower(v)
			}
			kept = append(kept, s.Key+"="+quote(v))
		}
		if len(kept) == 0 {
			return "", false
		}
		return strings.Join(kept, " "), true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return "", false
	}
	out := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if canonical {
		if out.Scheme = strings.ToLower(u.Scheme); out.Scheme == "postgresql" {
			out.Scheme = "postgres"
		}
		out.Host = canonicalHost(out.Scheme, u.Host)
	}
	if u.User != nil && u.User.Username() != "" {
		out.User = url.User(u.User.Username())
	}
	kept := url.Values{}
	pg := u.Scheme == "postgres" || u.Scheme == "postgresql"
	for pair := range strings.SplitSeq(u.RawQuery, "&") {
		k, v, _ := strings.Cut(pair, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			continue
		}
		// The postgres client reads database as dbname, the last of
		// them winning.
		if pg && k == "database" {
			k = "dbname"
		}
		if slices.Contains(identifying, k) {
			kept.Set(k, v)
		}
	}
	// A redis URL's ?db= chooses the database as its path does, and wins
	// over it: show it where the path shows it.
	if db := kept.Get("db"); db != "" && (u.Scheme == "redis" || u.Scheme == "rediss") {
		out.Path = "/" + db
		kept.Del("db")
	}
	if canonical && (out.Scheme == "redis" || out.Scheme == "rediss") && strings.Trim(out.Path, "/") == "" {
		out.Path = "/0"
	}
	if out.Host == "" && out.Path == "" && len(kept) == 0 {
		return "", false
	}
	out.RawQuery = kept.Encode()
	return out.String(), true
}

// quote writes a keyword/value setting's value as libpq reads it.
func quote(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// MaxSchemaBytes is the longest name PostgreSQL keeps: it cuts a longer
// one, so that two prefixes alike in their first 63 bytes would share a
// schema.
const MaxSchemaBytes = 63

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// PostgresSchema says why prefix cannot name the schema of a postgres
// store's tables, or "" when it can: a lower-case identifier of at most 63
// bytes that is neither a schema PostgreSQL keeps for itself (pg_ names,
// information_schema) nor public, the database's default schema, which
// other applications' tables share.
func PostgresSchema(prefix string) string {
	switch {
	case !schemaName.MatchString(prefix):
		return "must be a lower-case identifier (a-z, 0-9 and _, not starting with a digit): it names the store's schema"
	case len(prefix) > MaxSchemaBytes:
		return fmt.Sprintf("is %d bytes long: PostgreSQL cuts a schema's name at %d bytes, so prefixes alike that far would share one schema", len(prefix), MaxSchemaBytes)
	case strings.HasPrefix(prefix, "pg_"), prefix == "information_schema":
		return "names a schema PostgreSQL keeps for itself (pg_ names and information_schema); give the store a schema of its own, such as billing"
	case prefix == "public":
		return "is the database's default schema, where other applications' tables live: give the store a schema of its own, such as billing"
	}
	return ""
}
