package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// btreeMax is the most bytes a PostgreSQL btree index entry holds (btree
// version 4 on 8 kB pages), after compression. The key columns of every
// table, and the audit trail's run id and tool name, are indexed: a longer
// value is refused.
const btreeMax = 2704

// indexed is a value a statement writes into an index: the index's name,
// what the value is, and its length in bytes.
type indexed struct {
	index, what string
	n           int
}

// tooLong returns err, when it is the server's refusal of a row whose
// indexed value is over btreeMax ("index row size ... exceeds btree
// version 4 maximum 2704"), as an error naming the value among vals by the
// index that refused it, its length and the limit; any other err as is.
// The server's error stays wrapped.
func tooLong(err error, vals ...indexed) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "54000" || !strings.HasPrefix(pe.Message, "index row") {
		return err
	}
	for _, v := range vals {
		if strings.Contains(pe.Message, `"`+v.index+`"`) {
			return fmt.Errorf("the %s is too long to store (%d bytes; PostgreSQL indexes at most %d bytes of it, compressed): %w",
				v.what, v.n, btreeMax, err)
		}
	}
	return fmt.Errorf("a value is too long to store (PostgreSQL indexes at most %d bytes of it, compressed): %w", btreeMax, err)
}
