package vet

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentc-dev/agentc/internal/storeaddr"
)

// postgresURLProblem says why a postgres store's client cannot read raw,
// reading it with the store's own parser (pgxpool.ParseConfig), so that vet
// passes what the store reads and refuses what it refuses. What the client
// would read besides the string is left to where the store opens, so that
// vet's verdict is the same on every machine: a file the string names or
// the client finds (a service, a certificate or key) that is missing or
// unreadable here is not reported, and with a PG* environment variable
// set here (PGSSLMODE, PGPORT, ...) only a string the client cannot parse
// at all is reported, as the variable's value may be what the client
// refuses. The reason never quotes the string, which may hold a password.
func postgresURLProblem(raw string) error {
	if scheme, ok := storeaddr.URLScheme(raw); ok && scheme != "postgres" && scheme != "postgresql" {
		return fmt.Errorf("it is a %s:// URL; a postgres url is a postgres:// or postgresql:// URL, or keyword/value settings such as host=db dbname=app", scheme)
	}
	_, err := pgxpool.ParseConfig(raw)
	if err == nil {
		return nil
	}
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return err
	}
	bare := *pe
	bare.ConnString = ""
	reason := strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
	syntax := strings.HasPrefix(reason, "failed to parse as ")
	if !syntax && (readsFile(reason) || pgEnvSet()) {
		return nil
	}
	return errors.New(reason)
}

// readsFile reports whether the client's reason is about a file it read
// (a service file, a certificate, a key) rather than the string itself.
func readsFile(reason string) bool {
	if strings.HasPrefix(reason, "failed to read service") {
		return true
	}
	tls, ok := strings.CutPrefix(reason, "failed to configure TLS (")
	return ok && !strings.HasPrefix(tls, "sslmode is invalid") && !strings.HasPrefix(tls, `both "sslcert" and "sslkey" are required`)
}

// pgEnv are the environment variables the postgres client takes settings
// from when the string does not give them.
var pgEnv = []string{
	"PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGAPPNAME", "PGCONNECT_TIMEOUT",
	"PGSSLMODE", "PGSSLKEY", "PGSSLCERT", "PGSSLCERTMODE", "PGSSLSNI", "PGSSLROOTCERT", "PGSSLPASSWORD",
	"PGSSLNEGOTIATION", "PGTARGETSESSIONATTRS", "PGSERVICE", "PGSERVICEFILE", "PGTZ", "PGOPTIONS",
	"PGMINPROTOCOLVERSION", "PGMAXPROTOCOLVERSION", "PGCHANNELBINDING", "PGREQUIREAUTH",
}

func pgEnvSet() bool {
	for _, v := range pgEnv {
		if _, ok := os.LookupEnv(v); ok {
			return true
		}
	}
	return false
}
