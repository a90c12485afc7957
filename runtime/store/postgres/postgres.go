package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentc-dev/agentc/internal/storeaddr"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/store/redis"
)

// Kind is the store kind this package registers.
const Kind = "postgres"

// DefaultSchema holds the tables of a store without a prefix.
const DefaultSchema = "agentc"

// SchemaVersion is the version of the tables this package creates.
const SchemaVersion = 12

// CompatibleSince is the oldest schema version whose code still works on
// tables at SchemaVersion: it is stored next to the version, so an older
// build that knows at least CompatibleSince (and reads the column, from
// version 3 on) opens a newer schema instead of refusing it. A migration
// that only adds (a function under a new name, a trigger, a column with a
// default) leaves it; one that changes what older code calls raises it.
const CompatibleSince = 1

func init() {
	runtime.RegisterStoreKind(Kind, func(ctx context.Context, name string, s plan.Store) (runtime.StoreBackend, error) {
		url, err := redis.URL(s)
		if err != nil {
			return nil, err
		}
		timeout, err := s.OpTimeout()
		if err != nil {
			return nil, err
		}
		return Open(ctx, url, s.Prefix, WithTimeout(timeout))
	})
}

// Option adjusts how Open and OpenConfig open a store.
type Option func(*Store)

// WithTimeout bounds each operation of the store by d (a positive duration;
// plan.DefaultStoreTimeout without this option): see OpenConfig.
func WithTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithLogger sends what the store logs (a migration waiting for a lock)
// to l instead of the logger LogTo set.
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) { s.log = l }
}

// defaultLog is the logger of the stores opened without WithLogger.
var defaultLog atomic.Pointer[slog.Logger]

// LogTo sends what the stores opened without WithLogger log to l
// (slog.Default() until it is called), the stores a policy declares
// included.
func LogTo(l *slog.Logger) { defaultLog.Store(l) }

// logger returns the store's logger.
func (s *Store) logger() *slog.Logger {
	if s.log != nil {
		return s.log
	}
	if l := defaultLog.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// Store is a PostgreSQL database seen through a connection pool. It is safe
// for concurrent use.
type Store struct {
	pool     *connPool
	timeout  time.Duration
	log      *slog.Logger
	schema   string
	pgvector bool
	writes   atomic.Int64
	// purging is set while a purge of expired rows runs; purges is its
	// goroutine, which Close waits for. closed, under mu, stops new purges
	// once Close began waiting.
	purging atomic.Bool
	purges  sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	// checkpointTable is set once the checkpoint table exists (as this
	// version of the store writes it).
	checkpointTable atomic.Bool
}

// migrations[i] brings the tables from version i to i+1. %[1]s is the
// schema.
var migrations = []string{`
CREATE TABLE %[1]s.kv (
	key     text PRIMARY KEY,
	value   bytea NOT NULL,
	expires timestamptz
);
CREATE SEQUENCE %[1]s.fence;
CREATE TABLE %[1]s.lease (
	key     text PRIMARY KEY,
	state   text NOT NULL,
	token   bigint NOT NULL DEFAULT 0,
	until   timestamptz,
	result  bytea,
	expires timestamptz
);
CREATE FUNCTION %[1]s.lease_acquire(k text, lease_us bigint, keep_us bigint, takeover boolean,
	OUT status int, OUT tok bigint, OUT in_doubt boolean, OUT res bytea, OUT remaining_us bigint)
LANGUAGE plpgsql AS $$
DECLARE
	r %[1]s.lease%%ROWTYPE;
	t timestamptz := clock_timestamp();
	keep_until timestamptz := CASE WHEN keep_us > 0 THEN t + keep_us * interval '1 microsecond' END;
BEGIN
	status := 1; tok := 0; in_doubt := false; remaining_us := 0;
	DELETE FROM %[1]s.lease WHERE key = k AND expires <= t;
	INSERT INTO %[1]s.lease (key, state, token, until, expires)
		VALUES (k, 'pending', nextval('%[1]s.fence'), t + lease_us * interval '1 microsecond', keep_until)
		ON CONFLICT (key) DO NOTHING RETURNING token INTO tok;
	IF FOUND THEN
		status := 0;
		RETURN;
	END IF;
	tok := 0;
	SELECT * INTO r FROM %[1]s.lease WHERE key = k FOR UPDATE;
	IF NOT FOUND THEN
		RETURN; -- released meanwhile: held for an instant, ask again
	END IF;
	IF r.state = 'done' THEN
		status := 2; res := r.result;
		RETURN;
	END IF;
	IF r.until > t THEN
		remaining_us := (extract(epoch FROM r.until - t) * 1000000)::bigint;
		RETURN;
	END IF;
	IF NOT takeover THEN
		status := 3;
		RETURN;
	END IF;
	UPDATE %[1]s.lease SET token = nextval('%[1]s.fence'), until = t + lease_us * interval '1 microsecond', expires = keep_until
		WHERE key = k RETURNING token INTO tok;
	status := 0; in_doubt := true;
END $$;
CREATE TABLE %[1]s.rate (
	key     text PRIMARY KEY,
	tat     bigint NOT NULL,
	ok      boolean NOT NULL,
	wait    bigint NOT NULL
);
CREATE TABLE %[1]s.ledger (
	key        text PRIMARY KEY,
	in_tokens  bigint NOT NULL DEFAULT 0,
	out_tokens bigint NOT NULL DEFAULT 0,
	usd        double precision NOT NULL DEFAULT 0,
	calls      bigint NOT NULL DEFAULT 0,
	pending    bigint NOT NULL DEFAULT 0,
	refused    text NOT NULL DEFAULT '',
	expires    timestamptz
);
CREATE TABLE %[1]s.audit (
	id              bigserial PRIMARY KEY,
	time            timestamptz NOT NULL,
	layer           text NOT NULL DEFAULT '',
	stage           text NOT NULL DEFAULT '',
	tool            text NOT NULL DEFAULT '',
	phase           text NOT NULL,
	decision        text NOT NULL DEFAULT '',
	error_type      text NOT NULL DEFAULT '',
	error_message   text NOT NULL DEFAULT '',
	attempts        integer NOT NULL DEFAULT 0,
	run_id          text NOT NULL DEFAULT '',
	idempotency_key text NOT NULL DEFAULT '',
	duration_ns     bigint NOT NULL DEFAULT 0,
	args_digest     text NOT NULL DEFAULT '',
	args            jsonb
);
CREATE INDEX audit_run ON %[1]s.audit (run_id, id);
CREATE INDEX audit_tool_time ON %[1]s.audit (tool, time);
CREATE INDEX audit_time ON %[1]s.audit (time);
CREATE TABLE %[1]s.vectors (
	scope   text NOT NULL,
	id      text NOT NULL,
	vec     real[] NOT NULL,
	norm    double precision NOT NULL,
	value   bytea NOT NULL,
	expires timestamptz,
	PRIMARY KEY (scope, id)
);
`, `
-- A published result is read without writing: no fence token, no row lock,
-- and so no commit to wait for on a replay or a cache hit. Anything else
-- goes to the claim, which locks.
ALTER FUNCTION %[1]s.lease_acquire(text, bigint, bigint, boolean) RENAME TO lease_claim;
CREATE FUNCTION %[1]s.lease_acquire(k text, lease_us bigint, keep_us bigint, takeover boolean,
	OUT status int, OUT tok bigint, OUT in_doubt boolean, OUT res bytea, OUT remaining_us bigint)
LANGUAGE plpgsql AS $$
BEGIN
	SELECT 2, 0, false, l.result, 0 INTO status, tok, in_doubt, res, remaining_us FROM %[1]s.lease l
		WHERE l.key = k AND l.state = 'done' AND (l.expires IS NULL OR l.expires > clock_timestamp());
	IF FOUND THEN
		RETURN;
	END IF;
	SELECT c.status, c.tok, c.in_doubt, c.res, c.remaining_us INTO status, tok, in_doubt, res, remaining_us
		FROM %[1]s.lease_claim(k, lease_us, keep_us, takeover) AS c;
END $$;
`, `
-- A pending claim never expires before its lease ends: a call renewed
-- past the record's keep is neither deleted by the next claim nor by the
-- purge, and so never runs twice. The trigger holds for every writer,
-- older builds' statements included.
CREATE FUNCTION %[1]s.lease_outlives() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.state = 'pending' AND NEW.expires < NEW.until THEN
		NEW.expires := NEW.until;
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER lease_outlives BEFORE INSERT OR UPDATE ON %[1]s.lease
	FOR EACH ROW EXECUTE FUNCTION %[1]s.lease_outlives();
UPDATE %[1]s.lease SET expires = until WHERE state = 'pending' AND expires < until;
`, `
-- A budget reservation is a row of its own with its call's estimate and a
-- lease: the calls in flight count against the ceilings with their
-- estimates, and a reservation whose process died or whose reply was lost
-- stops counting when its lease ends. Both functions lock the ledger row
-- before they read or write its reservations, so the callers of one ledger
-- are serialised. The ledger's pending column is still kept for older
-- builds, which count only it. The table holds only the calls in flight
-- (a settlement deletes its row), so the purge of lapsed rows scans it
-- without an index on until, which every reservation would have to write.
CREATE TABLE %[1]s.reservation (
	key    text NOT NULL,
	id     text NOT NULL,
	tokens bigint NOT NULL DEFAULT 0,
	usd    double precision NOT NULL DEFAULT 0,
	until  timestamptz NOT NULL,
	PRIMARY KEY (key, id)
);
CREATE FUNCTION %[1]s.budget_reserve(k text, max_tokens bigint, max_usd double precision, max_calls bigint, ttl_us bigint,
	est_tokens bigint, est_usd double precision, rid text, lease_us bigint,
	OUT o_refused text, OUT o_tokens numeric, OUT o_usd double precision, OUT o_calls bigint,
	OUT o_pcalls bigint, OUT o_ptokens numeric, OUT o_pusd double precision)
LANGUAGE plpgsql AS $$
DECLARE
	l %[1]s.ledger%%ROWTYPE;
	t timestamptz;
BEGIN
	SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO %[1]s.ledger (key) VALUES (k) ON CONFLICT (key) DO NOTHING;
		SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	END IF;
	t := clock_timestamp();
	IF l.expires <= t THEN
		l.in_tokens := 0; l.out_tokens := 0; l.usd := 0; l.calls := 0; l.pending := 0;
		DELETE FROM %[1]s.reservation WHERE key = k;
	END IF;
	SELECT count(*), coalesce(sum(r.tokens), 0), coalesce(sum(r.usd), 0) INTO o_pcalls, o_ptokens, o_pusd
		FROM %[1]s.reservation r WHERE r.key = k AND r.until > t;
	o_tokens := l.in_tokens::numeric + l.out_tokens; o_usd := l.usd; o_calls := l.calls;
	o_refused := CASE
		WHEN est_tokens IS NOT NULL AND max_tokens IS NOT NULL AND o_tokens + o_ptokens + est_tokens > max_tokens THEN 'tokens+'
		WHEN est_usd IS NOT NULL AND max_usd IS NOT NULL AND est_usd > 0 AND o_usd + o_pusd + est_usd > max_usd THEN 'usd+'
		WHEN max_tokens IS NOT NULL AND o_tokens >= max_tokens THEN 'tokens'
		WHEN max_usd IS NOT NULL AND o_usd >= max_usd THEN 'usd'
		WHEN max_calls IS NOT NULL AND o_calls + o_pcalls >= max_calls THEN 'calls'
		ELSE '' END;
	IF o_refused = '' THEN
		INSERT INTO %[1]s.reservation (key, id, tokens, usd, until)
			VALUES (k, rid, greatest(coalesce(est_tokens, 0), 0), greatest(coalesce(est_usd, 0), 0), t + lease_us * interval '1 microsecond')
			ON CONFLICT (key, id) DO UPDATE SET tokens = excluded.tokens, usd = excluded.usd, until = excluded.until;
		l.pending := l.pending + 1;
	END IF;
	UPDATE %[1]s.ledger SET in_tokens = l.in_tokens, out_tokens = l.out_tokens, usd = l.usd, calls = l.calls, pending = l.pending,
		expires = CASE WHEN ttl_us > 0 THEN t + ttl_us * interval '1 microsecond' END
		WHERE key = k;
END $$;
CREATE FUNCTION %[1]s.budget_settle(k text, rid text, d_in bigint, d_out bigint, d_usd double precision, d_calls bigint, ttl_us bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	l %[1]s.ledger%%ROWTYPE;
	t timestamptz;
BEGIN
	SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO %[1]s.ledger (key) VALUES (k) ON CONFLICT (key) DO NOTHING;
		SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	END IF;
	t := clock_timestamp();
	IF l.expires <= t THEN
		l.in_tokens := 0; l.out_tokens := 0; l.usd := 0; l.calls := 0; l.pending := 0;
		DELETE FROM %[1]s.reservation WHERE key = k;
	ELSIF rid <> '' THEN
		DELETE FROM %[1]s.reservation WHERE key = k AND id = rid;
		IF FOUND AND l.pending > 0 THEN
			l.pending := l.pending - 1;
		END IF;
	END IF;
	UPDATE %[1]s.ledger SET in_tokens = l.in_tokens + d_in, out_tokens = l.out_tokens + d_out, usd = l.usd + d_usd,
		calls = l.calls + d_calls, pending = l.pending,
		expires = CASE WHEN ttl_us > 0 THEN t + ttl_us * interval '1 microsecond' END
		WHERE key = k;
END $$;
`, `
-- A claim records the nonce of the attempt that made it, with its token
-- ("<owner> <token>"): an attempt whose answer was lost asks again with
-- the same nonce and gets its claim back instead of finding it held and
-- then in doubt. A takeover, by any build, changes the token and so ends
-- the match. lease_acquire is unchanged for older builds.
ALTER TABLE %[1]s.lease ADD COLUMN owner text;
CREATE FUNCTION %[1]s.lease_acquire_as(k text, o text, lease_us bigint, keep_us bigint, takeover boolean,
	OUT status int, OUT tok bigint, OUT in_doubt boolean, OUT res bytea, OUT remaining_us bigint)
LANGUAGE plpgsql AS $$
BEGIN
	IF o <> '' THEN
		UPDATE %[1]s.lease SET until = clock_timestamp() + lease_us * interval '1 microsecond'
			WHERE key = k AND state = 'pending' AND owner = o || ' ' || token RETURNING token INTO tok;
		IF FOUND THEN
			status := 0; in_doubt := false; remaining_us := 0;
			RETURN;
		END IF;
	END IF;
	SELECT a.status, a.tok, a.in_doubt, a.res, a.remaining_us INTO status, tok, in_doubt, res, remaining_us
		FROM %[1]s.lease_acquire(k, lease_us, keep_us, takeover) AS a;
	IF status = 0 AND o <> '' THEN
		UPDATE %[1]s.lease SET owner = o || ' ' || tok WHERE key = k AND token = tok;
	END IF;
END $$;
`, `
-- A reservation settled is remembered for an hour (runtime.SettleMemory),
-- so that a settlement sent again (its answer was lost) charges once. A
-- reservation whose lease ended unsettled is charged its hold (one call
-- and its estimate) and remembered with it (tokens and usd set), so that
-- a settlement after that adds only what it exceeds the hold by. Older
-- builds call the same functions and so get the same behaviour; only
-- their purge still deletes lapsed reservations uncharged.
CREATE TABLE %[1]s.settled (
	key    text NOT NULL,
	id     text NOT NULL,
	tokens bigint,
	usd    double precision,
	forget timestamptz NOT NULL,
	PRIMARY KEY (key, id)
);
-- budget_lapse charges nothing itself: it moves the reservations of k
-- whose lease ended at t to settled, with their hold, forgets the
-- settlements whose time has come, and returns the number of lapsed
-- reservations and the sums of their estimates, for its caller, which
-- holds the ledger row's lock, to charge.
CREATE FUNCTION %[1]s.budget_lapse(k text, t timestamptz, OUT o_n bigint, OUT o_tokens bigint, OUT o_usd double precision)
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM %[1]s.settled s WHERE s.key = k AND s.forget <= t;
	WITH gone AS (DELETE FROM %[1]s.reservation r WHERE r.key = k AND r.until <= t RETURNING r.id, r.tokens, r.usd),
	kept AS (INSERT INTO %[1]s.settled (key, id, tokens, usd, forget) SELECT k, g.id, g.tokens, g.usd, t + interval '1 hour' FROM gone g
		ON CONFLICT (key, id) DO UPDATE SET tokens = excluded.tokens, usd = excluded.usd, forget = excluded.forget)
	SELECT count(*), coalesce(sum(g.tokens), 0), coalesce(sum(g.usd), 0) INTO o_n, o_tokens, o_usd FROM gone g;
END $$;
CREATE OR REPLACE FUNCTION %[1]s.budget_reserve(k text, max_tokens bigint, max_usd double precision, max_calls bigint, ttl_us bigint,
	est_tokens bigint, est_usd double precision, rid text, lease_us bigint,
	OUT o_refused text, OUT o_tokens numeric, OUT o_usd double precision, OUT o_calls bigint,
	OUT o_pcalls bigint, OUT o_ptokens numeric, OUT o_pusd double precision)
LANGUAGE plpgsql AS $$
DECLARE
	l %[1]s.ledger%%ROWTYPE;
	g record;
	t timestamptz;
BEGIN
	SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO %[1]s.ledger (key) VALUES (k) ON CONFLICT (key) DO NOTHING;
		SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	END IF;
	t := clock_timestamp();
	IF l.expires <= t THEN
		l.in_tokens := 0; l.out_tokens := 0; l.usd := 0; l.calls := 0; l.pending := 0;
		DELETE FROM %[1]s.reservation WHERE key = k;
		DELETE FROM %[1]s.settled WHERE key = k;
	END IF;
	SELECT * INTO g FROM %[1]s.budget_lapse(k, t);
	l.calls := l.calls + g.o_n; l.in_tokens := l.in_tokens + g.o_tokens; l.usd := l.usd + g.o_usd;
	l.pending := greatest(l.pending - g.o_n, 0);
	SELECT count(*), coalesce(sum(r.tokens), 0), coalesce(sum(r.usd), 0) INTO o_pcalls, o_ptokens, o_pusd
		FROM %[1]s.reservation r WHERE r.key = k AND r.until > t;
	o_tokens := l.in_tokens::numeric + l.out_tokens; o_usd := l.usd; o_calls := l.calls;
	o_refused := CASE
		WHEN est_tokens IS NOT NULL AND max_tokens IS NOT NULL AND o_tokens + o_ptokens + est_tokens > max_tokens THEN 'tokens+'
		WHEN est_usd IS NOT NULL AND max_usd IS NOT NULL AND est_usd > 0 AND o_usd + o_pusd + est_usd > max_usd THEN 'usd+'
		WHEN max_tokens IS NOT NULL AND o_tokens >= max_tokens THEN 'tokens'
		WHEN max_usd IS NOT NULL AND o_usd >= max_usd THEN 'usd'
		WHEN max_calls IS NOT NULL AND o_calls + o_pcalls >= max_calls THEN 'calls'
		ELSE '' END;
	IF o_refused = '' THEN
		INSERT INTO %[1]s.reservation (key, id, tokens, usd, until)
			VALUES (k, rid, greatest(coalesce(est_tokens, 0), 0), greatest(coalesce(est_usd, 0), 0), t + lease_us * interval '1 microsecond')
			ON CONFLICT (key, id) DO UPDATE SET tokens = excluded.tokens, usd = excluded.usd, until = excluded.until;
		DELETE FROM %[1]s.settled WHERE key = k AND id = rid;
		l.pending := l.pending + 1;
	END IF;
	UPDATE %[1]s.ledger SET in_tokens = l.in_tokens, out_tokens = l.out_tokens, usd = l.usd, calls = l.calls, pending = l.pending,
		expires = CASE WHEN ttl_us > 0 THEN t + ttl_us * interval '1 microsecond' END
		WHERE key = k;
END $$;
CREATE OR REPLACE FUNCTION %[1]s.budget_settle(k text, rid text, d_in bigint, d_out bigint, d_usd double precision, d_calls bigint, ttl_us bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	l %[1]s.ledger%%ROWTYPE;
	s %[1]s.settled%%ROWTYPE;
	g record;
	t timestamptz;
	ci bigint;
BEGIN
	SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO %[1]s.ledger (key) VALUES (k) ON CONFLICT (key) DO NOTHING;
		SELECT * INTO l FROM %[1]s.ledger WHERE key = k FOR UPDATE;
	END IF;
	t := clock_timestamp();
	IF l.expires <= t THEN
		l.in_tokens := 0; l.out_tokens := 0; l.usd := 0; l.calls := 0; l.pending := 0;
		DELETE FROM %[1]s.reservation WHERE key = k;
		DELETE FROM %[1]s.settled WHERE key = k;
	END IF;
	SELECT * INTO g FROM %[1]s.budget_lapse(k, t);
	l.calls := l.calls + g.o_n; l.in_tokens := l.in_tokens + g.o_tokens; l.usd := l.usd + g.o_usd;
	l.pending := greatest(l.pending - g.o_n, 0);
	IF rid <> '' THEN
		SELECT * INTO s FROM %[1]s.settled WHERE key = k AND id = rid;
		IF NOT FOUND THEN
			DELETE FROM %[1]s.reservation WHERE key = k AND id = rid;
			IF FOUND AND l.pending > 0 THEN
				l.pending := l.pending - 1;
			END IF;
			INSERT INTO %[1]s.settled (key, id, forget) VALUES (k, rid, t + interval '1 hour');
		ELSIF s.tokens IS NULL THEN
			d_in := 0; d_out := 0; d_usd := 0; d_calls := 0; -- settled already
		ELSE -- lapsed: its hold is charged; add what exceeds it
			d_in := greatest(d_in, 0); d_out := greatest(d_out, 0);
			ci := least(d_in, s.tokens);
			d_out := d_out - least(d_out, s.tokens - ci);
			d_in := d_in - ci;
			d_usd := greatest(d_usd - s.usd, 0);
			d_calls := greatest(d_calls - 1, 0);
			UPDATE %[1]s.settled SET tokens = NULL, usd = NULL WHERE key = k AND id = rid;
		END IF;
	END IF;
	UPDATE %[1]s.ledger SET in_tokens = l.in_tokens + d_in, out_tokens = l.out_tokens + d_out, usd = l.usd + d_usd,
		calls = l.calls + d_calls, pending = l.pending,
		expires = CASE WHEN ttl_us > 0 THEN t + ttl_us * interval '1 microsecond' END
		WHERE key = k;
END $$;
`, `
-- The store's identity (Store.StoreID): a random id, inserted by the first
-- process that asks for it. A resumed agent turn compares it with the one
-- its checkpoint recorded when the turn made its calls: a schema dropped
-- and created again has another, and its empty claims table says nothing
-- about whether a call started.
CREATE TABLE %[1]s.identity (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	id  text NOT NULL
);
`, `
-- The interval (microseconds) a bucket's tat counts in: a call under
-- another rescales it (runtime.RescaleTAT). NULL in the rows of older
-- builds, which the next call takes to count in its own interval; older
-- builds, which name the columns they write, go on working beside.
ALTER TABLE %[1]s.rate ADD COLUMN IF NOT EXISTS interval_us bigint;
`, `
-- Each audit record carries an id its appending process gave it: an
-- INSERT sent again after its connection failed, while the first one may
-- still commit on the server, waits for that one's transaction on the
-- unique index and adds no second row. NULL in the rows of older builds,
-- which the partial index leaves out; older builds, which name the columns
-- they write, go on appending beside.
ALTER TABLE %[1]s.audit ADD COLUMN IF NOT EXISTS record uuid;
CREATE UNIQUE INDEX IF NOT EXISTS audit_record ON %[1]s.audit (record) WHERE record IS NOT NULL;
`, `
-- A claim keeps a note of its call (runtime.Leaser.AcquireAs: the digest
-- of its arguments), returned to a caller that finds it held or in doubt;
-- a claim in doubt is taken over only by a caller with the same note (none
-- and empty alike). The claim row is locked before lease_acquire_as looks
-- at it, so that its note cannot change in between; a published result is
-- still read without a lock. NULL in the claims of older builds, whose
-- lease_acquire_as goes on working beside (and takes a claim over
-- whatever its note).
ALTER TABLE %[1]s.lease ADD COLUMN IF NOT EXISTS note bytea;
CREATE FUNCTION %[1]s.lease_acquire_noted(k text, o text, n bytea, lease_us bigint, keep_us bigint, takeover boolean,
	OUT status int, OUT tok bigint, OUT in_doubt boolean, OUT res bytea, OUT remaining_us bigint, OUT found_note bytea)
LANGUAGE plpgsql AS $$
DECLARE
	held bytea;
	take boolean := takeover;
BEGIN
	IF take THEN
		SELECT coalesce(l.note, ''::bytea) INTO held FROM %[1]s.lease l WHERE l.key = k AND l.state = 'pending' FOR UPDATE;
		IF FOUND AND held <> coalesce(n, ''::bytea) THEN
			take := false;
		END IF;
	END IF;
	SELECT a.status, a.tok, a.in_doubt, a.res, a.remaining_us INTO status, tok, in_doubt, res, remaining_us
		FROM %[1]s.lease_acquire_as(k, o, lease_us, keep_us, take) AS a;
	IF status = 0 THEN
		UPDATE %[1]s.lease SET note = nullif(n, ''::bytea) WHERE key = k AND token = tok;
	ELSIF status IN (1, 3) THEN
		SELECT l.note INTO found_note FROM %[1]s.lease l WHERE l.key = k;
	END IF;
END $$;
`, `
-- A claim in doubt without a note (made without one, or by a build before
-- notes) is taken over by any caller, and keeps the caller's note from
-- then on, so that a call with other arguments never takes over the claim
-- of the call that took it, should that one stop in doubt too. The
-- function keeps its arguments and results: a build at version 10 calls
-- it as before.
CREATE OR REPLACE FUNCTION %[1]s.lease_acquire_noted(k text, o text, n bytea, lease_us bigint, keep_us bigint, takeover boolean,
	OUT status int, OUT tok bigint, OUT in_doubt boolean, OUT res bytea, OUT remaining_us bigint, OUT found_note bytea)
LANGUAGE plpgsql AS $$
DECLARE
	held bytea;
	take boolean := takeover;
BEGIN
	IF take THEN
		SELECT coalesce(l.note, ''::bytea) INTO held FROM %[1]s.lease l WHERE l.key = k AND l.state = 'pending' FOR UPDATE;
		IF FOUND AND held <> ''::bytea AND held <> coalesce(n, ''::bytea) THEN
			take := false;
		END IF;
	END IF;
	SELECT a.status, a.tok, a.in_doubt, a.res, a.remaining_us INTO status, tok, in_doubt, res, remaining_us
		FROM %[1]s.lease_acquire_as(k, o, lease_us, keep_us, take) AS a;
	IF status = 0 THEN
		UPDATE %[1]s.lease SET note = nullif(n, ''::bytea) WHERE key = k AND token = tok;
	ELSIF status IN (1, 3) THEN
		SELECT l.note INTO found_note FROM %[1]s.lease l WHERE l.key = k;
	END IF;
END $$;
`, `
-- A claim taken over is pending in the statement that grants it: a row
-- damaged in the table (a state no build writes) keeps no state of its
-- own once taken over, so no other caller finds the claim granted damaged
-- and replaces it while its call runs. The function keeps its arguments
-- and results: a build at version 11 calls it as before.
CREATE OR REPLACE FUNCTION %[1]s.lease_claim(k text, lease_us bigint, keep_us bigint, takeover boolean,
	OUT status int, OUT tok bigint, OUT in_doubt boolean, OUT res bytea, OUT remaining_us bigint)
LANGUAGE plpgsql AS $$
DECLARE
	r %[1]s.lease%%ROWTYPE;
	t timestamptz := clock_timestamp();
	keep_until timestamptz := CASE WHEN keep_us > 0 THEN t + keep_us * interval '1 microsecond' END;
BEGIN
	status := 1; tok := 0; in_doubt := false; remaining_us := 0;
	DELETE FROM %[1]s.lease WHERE key = k AND expires <= t;
	INSERT INTO %[1]s.lease (key, state, token, until, expires)
		VALUES (k, 'pending', nextval('%[1]s.fence'), t + lease_us * interval '1 microsecond', keep_until)
		ON CONFLICT (key) DO NOTHING RETURNING token INTO tok;
	IF FOUND THEN
		status := 0;
		RETURN;
	END IF;
	tok := 0;
	SELECT * INTO r FROM %[1]s.lease WHERE key = k FOR UPDATE;
	IF NOT FOUND THEN
		RETURN; -- released meanwhile: held for an instant, ask again
	END IF;
	IF r.state = 'done' THEN
		status := 2; res := r.result;
		RETURN;
	END IF;
	IF r.until > t THEN
		remaining_us := (extract(epoch FROM r.until - t) * 1000000)::bigint;
		RETURN;
	END IF;
	IF NOT takeover THEN
		status := 3;
		RETURN;
	END IF;
	UPDATE %[1]s.lease SET state = 'pending', token = nextval('%[1]s.fence'), until = t + lease_us * interval '1 microsecond', expires = keep_until
		WHERE key = k RETURNING token INTO tok;
	status := 0; in_doubt := true;
END $$;
`}

// Open connects to the database at url, creates or migrates the tables of
// the schema named prefix (DefaultSchema when empty) and returns the store.
func Open(ctx context.Context, url, prefix string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres url: %w", err)
	}
	return OpenConfig(ctx, cfg, prefix, opts...)
}

// OpenConfig is Open with a pool configuration the caller prepared (from
// pgxpool.ParseConfig, with a tracer, a dialer or pool sizes of its own).
// It sets synchronous_commit on the configuration.
//
// Each operation of the store (a port's method) is bounded by its timeout
// (WithTimeout): it fails with an error wrapping context.DeadlineExceeded
// when the server has not answered by then, waiting for a pooled
// connection included. So that a statement the client gave up on is not
// committed later (one that waited on a row lock another session held),
// the server is told to abandon statements at four fifths of the timeout
// (statement_timeout, unless the configuration sets one) and the statement
// is rolled back. Connecting is bounded by the timeout unless the
// configuration sets connect_timeout. Reading the schema's version, all
// an open does when the schema needs no migration, is bounded by the
// timeout as an operation is; a migration's waits for locks are bounded
// by 30 s each (see migrate). An operation the server refuses a new
// connection for its connection limit (SQLSTATE 53300) waits, within its
// timeout, for one of the pool's to be free (connPool).
func OpenConfig(ctx context.Context, cfg *pgxpool.Config, prefix string, opts ...Option) (*Store, error) {
	if prefix == "" {
		prefix = DefaultSchema
	}
	if why := storeaddr.PostgresSchema(prefix); why != "" {
		return nil, fmt.Errorf("postgres: prefix %q %s", prefix, why)
	}
	s := &Store{schema: prefix, timeout: plan.DefaultStoreTimeout}
	for _, o := range opts {
		o(s)
	}
	// Every write is durable when its statement returns.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	if _, set := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(serverTimeout(s.timeout).Milliseconds(), 1), 10)
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = s.timeout
	}
	checkIdle(cfg)
	s.pool = newConnPool(cfg, s.timeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.pool.Pool = pool
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: %w", cfg.ConnConfig.Host, err)
	}
	return s, nil
}

// serverTimeout is the statement_timeout of a store whose operations are
// bounded by timeout: the server abandons a statement, and rolls it back,
// before the client stops waiting for it.
func serverTimeout(timeout time.Duration) time.Duration { return timeout * 4 / 5 }

// Timeout returns the bound of each operation.
func (s *Store) Timeout() time.Duration { return s.timeout }

// op returns the context of one operation under ctx: ctx bounded by the
// store's timeout.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// migrate brings the schema to SchemaVersion. A schema this build can use
// as it is (at its version, or a newer one declared compatible) is only
// read (current): opening it takes no lock a reader of its tables holds
// up, such as a backup's. Otherwise upgrade creates or migrates it.
func (s *Store) migrate(ctx context.Context) error {
	ok, err := s.current(ctx)
	if err != nil || ok {
		return err
	}
	return s.upgrade(ctx)
}

// pgvectorInstalled reports whether the pgvector extension is installed.
const pgvectorInstalled = `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')`

// current reports whether the schema is one this build uses without a
// migration, reading its version within the store's timeout: that read
// takes the lock of a reader, which waits only for a session that altered
// or locked schema_version exclusively, and then fails, naming the lock
// and its holders, when the lock is not had within four fifths of the
// timeout. A schema not created yet, or older, is not current.
func (s *Store) current(ctx context.Context) (bool, error) {
	// Connecting is bounded by the connect timeout, as for an operation.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	ctx, cancel := s.op(ctx)
	defer cancel()
	wait := serverTimeout(s.timeout)
	var v, compatible int
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = %d`, milliseconds(wait))); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.q(`SELECT version, compatible FROM §.schema_version`)).Scan(&v, &compatible); err != nil {
			return err
		}
		return tx.QueryRow(ctx, pgvectorInstalled).Scan(&s.pgvector)
	})
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42703"):
		// No table (or no row) yet, or no column compatible (version 2
		// or older).
		return false, nil
	case lockTimedOut(err):
		table := s.schema + ".schema_version"
		return false, fmt.Errorf("read the schema version: waited %s for a lock on %s, which another session holds (%s) until its transaction ends: %w",
			wait, table, s.lockHolders(table), err)
	case err != nil:
		return false, fmt.Errorf("read the schema version: %w", err)
	}
	if v < len(migrations) {
		return false, nil
	}
	return true, readable(s.schema, v, compatible)
}

// upgrade creates the schema and brings its tables to SchemaVersion, in
// one transaction under an advisory lock, which serialises the migrations
// of processes that open the schema at once. Its statements are not
// bounded by the store's timeout (a migration may take longer than an
// operation), but each wait for a lock is, by migrationLockWait: another
// process's migration, or a session holding a table a migration alters.
// A wait longer than lockNotice is logged with the sessions waited for.
func (s *Store) upgrade(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		defer s.noteLockWait(ctx, tx.Conn().PgConn().PID())()
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = %d`, milliseconds(migrationLockWait))); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agentc schema ' || $1))`, s.schema); err != nil {
			if lockTimedOut(err) {
				return fmt.Errorf("lock the schema: waited %s for the lock of schema %s's migrations, which another session holds (%s): %w",
					migrationLockWait, s.schema, s.lockHolders(""), err)
			}
			return fmt.Errorf("lock the schema: %w", err)
		}
		// compatible is the oldest version whose code works on the tables
		// (0: not recorded, only the version's own).
		if _, err := tx.Exec(ctx, s.q(`CREATE SCHEMA IF NOT EXISTS §;
			CREATE TABLE IF NOT EXISTS §.schema_version (version integer NOT NULL)`)); err != nil {
			return s.lockErr("create the schema", err)
		}
		var hasCompatible bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'compatible' AND NOT attisdropped)`,
			s.schema+".schema_version").Scan(&hasCompatible); err != nil {
			return fmt.Errorf("read the schema version: %w", err)
		}
		if !hasCompatible {
			if _, err := tx.Exec(ctx, s.q(`ALTER TABLE §.schema_version ADD COLUMN compatible integer NOT NULL DEFAULT 0`)); err != nil {
				return s.lockErr("create the schema", err)
			}
		}
		var v, compatible int
		err := tx.QueryRow(ctx, s.q(`SELECT version, compatible FROM §.schema_version`)).Scan(&v, &compatible)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := tx.Exec(ctx, s.q(`INSERT INTO §.schema_version VALUES (0, 0)`)); err != nil {
				return err
			}
		} else if err != nil {
			return s.lockErr("read the schema version", err)
		}
		if err := readable(s.schema, v, compatible); err != nil {
			return err
		}
		if v < len(migrations) {
			for i := v; i < len(migrations); i++ {
				if _, err := tx.Exec(ctx, fmt.Sprintf(migrations[i], s.schema)); err != nil {
					return s.lockErr(fmt.Sprintf("migrate schema %s to version %d", s.schema, i+1), err)
				}
			}
			if _, err := tx.Exec(ctx, s.q(`UPDATE §.schema_version SET version = $1, compatible = $2`),
				len(migrations), CompatibleSince); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, pgvectorInstalled).Scan(&s.pgvector)
	})
}

// migrationLockWait bounds each wait of a migration for a lock;
// lockNotice is how long a migration runs before the sessions it waits
// for, if any, are logged.
var migrationLockWait, lockNotice = 30 * time.Second, time.Second

// milliseconds is d in whole milliseconds, at least 1 (0 would turn a
// server timeout off).
func milliseconds(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// lockTimedOut reports whether err is a statement the server cancelled
// because it waited for a lock longer than lock_timeout.
func lockTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// lockErr is the error of a migration's step that failed: one that waited
// too long for a lock says so.
func (s *Store) lockErr(step string, err error) error {
	if lockTimedOut(err) {
		return fmt.Errorf("%s: waited %s for a lock on a table of schema %s, which another session holds: %w", step, migrationLockWait, s.schema, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// noteLockWait logs, once lockNotice has passed, the sessions the
// backend pid waits for a lock of, if any. The returned stop ends the
// check when it has begun and waits for it: the check needs a connection
// of the pool besides the migration's, which a pool of one connection
// has only once the migration has ended, and must not hold it up.
func (s *Store) noteLockWait(ctx context.Context, pid uint32) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t := time.AfterFunc(lockNotice, func() {
		defer close(done)
		if held := s.sessions(ctx, `pid = ANY(pg_blocking_pids($1))`, pid); len(held) > 0 {
			s.logger().Warn("postgres: migrating the schema waits for a lock another session holds", "schema", s.schema,
				"held_by", held, "gives_up_after", migrationLockWait)
		}
	})
	return func() {
		cancel()
		if !t.Stop() {
			<-done
		}
	}
}

// lockHolders describes the sessions other than the store's holding a lock
// on table (the advisory lock of a migration when table is ""), or says
// none could be named.
func (s *Store) lockHolders(table string) string {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	var held []string
	if table == "" {
		held = s.sessions(ctx, `pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND objid = (hashtext('agentc schema ' || $1)::bigint & 4294967295)::oid)`, s.schema)
	} else {
		held = s.sessions(ctx, `pid IN (SELECT pid FROM pg_locks WHERE locktype = 'relation' AND granted AND relation = to_regclass($1))`, table)
	}
	if len(held) == 0 {
		return "not named: its session ended, or this role may not see it"
	}
	return strings.Join(held, "; ")
}

// sessions describes the sessions of pg_stat_activity that where selects
// (with arg as $1), each by pid, the locks it holds, its state and the
// start of its statement, or nil when the query fails.
func (s *Store) sessions(ctx context.Context, where string, arg any) []string {
	rows, err := s.pool.Query(ctx, `SELECT format('pid %s %s, %s: %s', a.pid,
			coalesce((SELECT string_agg(DISTINCT l.mode, ',') FROM pg_locks l WHERE l.pid = a.pid AND l.granted
				AND l.locktype IN ('relation', 'advisory')), ''),
			coalesce(a.state, ''), left(coalesce(a.query, ''), 120))
		FROM pg_stat_activity a WHERE a.pid <> pg_backend_pid() AND a.`+where+` ORDER BY a.pid`, arg)
	if err != nil {
		return nil
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil
	}
	return held
}

// readable reports whether this build can use a schema at version v whose
// code works from version compatible on: one it knows or can migrate, or a
// newer one that declares this build's version compatible.
func readable(schema string, v, compatible int) error {
	if v <= len(migrations) {
		return nil
	}
	if compatible == 0 || compatible > len(migrations) {
		return fmt.Errorf("schema %s is at version %d, newer than this build knows (%d) and not usable by it; run a build that knows version %d or later: %w",
			schema, v, len(migrations), max(compatible, v), runtime.ErrStoreUnusable)
	}
	return nil
}

// Pool returns the connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool.Pool }

// Schema returns the schema that holds the tables.
func (s *Store) Schema() string { return s.schema }

// PGVector reports whether Query uses the pgvector extension.
func (s *Store) PGVector() bool { return s.pgvector }

// Close waits for a purge in progress and closes the pool; writes after
// it start no purge. It returns within the store's timeout: with a server
// that stopped answering, the driver would wait up to 15 s for each
// connection whose statement timed out, so the pool is left to finish
// closing in the background and Close says so, instead of holding a
// host's shutdown or reload.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.purges.Wait()
		s.pool.Close()
	}()
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("postgres: the pool did not close within %s (the server does not answer); it goes on closing in the background", s.timeout)
	}
}

// q expands the schema into a statement.
func (s *Store) q(stmt string) string { return strings.ReplaceAll(stmt, "§", s.schema) }

// purgeEvery is how many writes pass between purges of expired rows.
var purgeEvery int64 = 1024

// wrote counts a write and, every purgeEvery writes, purges expired rows
// in the background, so no call waits for the purge. A failed purge is
// harmless: reads and writes ignore expired rows.
func (s *Store) wrote(ctx context.Context) {
	if s.writes.Add(1)%purgeEvery != 0 || !s.purging.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.purging.Store(false)
		return
	}
	s.purges.Go(func() {
		defer s.purging.Store(false)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(ctx, s.q(`BEGIN; SET LOCAL statement_timeout = '30s';
			DELETE FROM §.kv WHERE expires <= now();
			DELETE FROM §.lease WHERE expires <= now() AND NOT (state = 'pending' AND until > now());
			DELETE FROM §.ledger WHERE expires <= now();
			DELETE FROM §.reservation r WHERE r.until <= now() AND NOT EXISTS (SELECT FROM §.ledger l WHERE l.key = r.key);
			DELETE FROM §.settled WHERE forget <= now();
			DELETE FROM §.vectors WHERE expires <= now();
			DELETE FROM §.rate WHERE tat < (extract(epoch FROM now()) * 1000000)::bigint;
			COMMIT`))
	})
}

// ttlArg is a ttl in microseconds for the SQL side.
func ttlArg(ttl time.Duration) int64 { return max(ttl.Microseconds(), 0) }

// Get implements runtime.KV.
func (s *Store) Get(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var v []byte
	err := s.pool.QueryRow(ctx, s.q(`SELECT value FROM §.kv WHERE key = $1 AND (expires IS NULL OR expires > now())`), key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres get: %w", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

const expiresSQL = `CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 microsecond' END`

// Set implements runtime.KV.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if value == nil {
		value = []byte{}
	}
	_, err := s.pool.Exec(ctx, s.q(`INSERT INTO §.kv (key, value, expires) VALUES ($1, $2, `+expiresSQL+`)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires = excluded.expires`), key, value, ttlArg(ttl))
	if err != nil {
		return fmt.Errorf("postgres set: %w", tooLong(err, indexed{"kv_pkey", "key", len(key)}))
	}
	s.wrote(ctx)
	return nil
}

// SetIfAbsent implements runtime.KV: one statement inserts the key or
// replaces an expired row.
func (s *Store) SetIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if value == nil {
		value = []byte{}
	}
	tag, err := s.pool.Exec(ctx, s.q(`INSERT INTO §.kv (key, value, expires) VALUES ($1, $2, `+expiresSQL+`)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires = excluded.expires
		WHERE §.kv.expires <= now()`), key, value, ttlArg(ttl))
	if err != nil {
		return false, fmt.Errorf("postgres set-if-absent: %w", tooLong(err, indexed{"kv_pkey", "key", len(key)}))
	}
	s.wrote(ctx)
	return tag.RowsAffected() == 1, nil
}

// Delete implements runtime.KV.
func (s *Store) Delete(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.q(`DELETE FROM §.kv WHERE key = $1`), key); err != nil {
		return fmt.Errorf("postgres delete: %w", err)
	}
	return nil
}

// Acquire implements runtime.Leaser: one call of lease_acquire_noted.
func (s *Store) Acquire(ctx context.Context, key string, lease, keep time.Duration, takeover bool) (runtime.LeaseGrant, error) {
	return s.AcquireAs(ctx, key, "", nil, lease, keep, takeover)
}

// AcquireAs implements runtime.Leaser: one call of lease_acquire_noted.
func (s *Store) AcquireAs(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool) (runtime.LeaseGrant, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var (
		status    int
		g         runtime.LeaseGrant
		remaining int64
	)
	acquire := func() error {
		return s.pool.QueryRow(ctx, s.q(`SELECT status, tok, in_doubt, res, remaining_us, found_note FROM §.lease_acquire_noted($1, $2, $3, $4, $5, $6)`),
			key, owner, note, max(lease.Microseconds(), 1), ttlArg(keep), takeover).Scan(&status, &g.Token, &g.InDoubt, &g.Result, &remaining, &g.Note)
	}
	err := acquire()
	// A claim whose connection failed under it (see fenced) is asked for
	// again on another connection when it has an owner: a claim the first
	// attempt made is the owner's again. Without an owner it would be
	// found held, by this caller.
	for tries := 1; err != nil && owner != "" && tries < appendTries && connectionLost(ctx, err); tries++ {
		err = acquire()
	}
	if err != nil {
		return runtime.LeaseGrant{}, fmt.Errorf("postgres lease: %w", tooLong(err, indexed{"lease_pkey", "key", len(key)}))
	}
	g.Status = runtime.LeaseStatus(status)
	g.Remaining = time.Duration(remaining) * time.Microsecond
	if g.Status == runtime.LeaseDone && g.Result == nil {
		g.Result = []byte{}
	}
	s.wrote(ctx)
	if g.Status == runtime.LeaseHeld || g.Status == runtime.LeaseInDoubt {
		return s.undamaged(ctx, key, owner, note, lease, keep, takeover, g)
	}
	return g, nil
}

// damagedLease is the condition of a lease row no build writes: a state
// that is neither pending nor done, or a claim without its lease end.
const damagedLease = `(state NOT IN ('pending', 'done') OR state = 'pending' AND until IS NULL)`

// undamaged checks the row of key that AcquireAs found held or in doubt
// (g), as Redis checks its record before: a row damaged in the table (a
// state no build writes, a claim without its lease end) may be the claim
// or the outcome of a call that ran. Asked without a takeover, it is in
// doubt and the grant says why (Unreadable); a takeover replaces it, in
// doubt. One round trip more, on those paths only. (A takeover of a
// damaged row whose lease end has passed is lease_claim's: it makes the
// row pending in the statement that grants the claim, schema version 12,
// so that no caller finds a claim granted damaged.)
func (s *Store) undamaged(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool, g runtime.LeaseGrant) (runtime.LeaseGrant, error) {
	var (
		state   string
		noUntil bool
	)
	err := s.pool.QueryRow(ctx, s.q(`SELECT state, until IS NULL FROM §.lease WHERE key = $1`), key).Scan(&state, &noUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return g, nil
	}
	if err != nil {
		return runtime.LeaseGrant{}, fmt.Errorf("postgres lease: %w", err)
	}
	var why string
	switch {
	case state != "pending" && state != "done":
		why = fmt.Sprintf("state %q is neither pending nor done", state)
	case state == "pending" && noUntil:
		why = "its lease end is missing"
	default:
		return g, nil
	}
	if !takeover {
		return runtime.LeaseGrant{Status: runtime.LeaseInDoubt, Unreadable: errors.New(why)}, nil
	}
	// The row is made a claim whose lease ends now, never deleted: a
	// caller between this and the takeover finds it in doubt, as the
	// damaged row was, rather than no claim at all.
	if _, err := s.pool.Exec(ctx, s.q(`UPDATE §.lease SET state = 'pending', until = clock_timestamp() WHERE key = $1 AND `+damagedLease), key); err != nil {
		return runtime.LeaseGrant{}, fmt.Errorf("postgres lease: %w", err)
	}
	g, err = s.AcquireAs(ctx, key, owner, note, lease, keep, takeover)
	if err == nil && g.Status == runtime.LeaseAcquired {
		g.InDoubt = true
	}
	return g, err
}

// fenced runs stmt, a write of a claim fenced by its token, and reports
// whether it matched the claim. When the connection fails under it
// (connectionLost: its backend terminated, a proxy or a restart that cut
// it while it sat in the pool), it is run again on another connection, up
// to appendTries times within the store's timeout: the claim's call has
// run by then (or is running), and a publish, release or doubt lost that
// way would leave its key in doubt, the server being up. Each statement
// is safe to repeat: a repeat of one that committed before its answer was
// lost matches as the first did (Publish's recognises its own result).
func (s *Store) fenced(ctx context.Context, what, stmt string, args ...any) (bool, error) {
	tag, err := s.pool.Exec(ctx, s.q(stmt), args...)
	for tries := 1; err != nil && tries < appendTries && connectionLost(ctx, err); tries++ {
		tag, err = s.pool.Exec(ctx, s.q(stmt), args...)
	}
	if err != nil {
		return false, fmt.Errorf("postgres lease %s: %w", what, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Renew implements runtime.Leaser.
func (s *Store) Renew(ctx context.Context, key string, token int64, lease time.Duration) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.fenced(ctx, "renew", `UPDATE §.lease SET until = clock_timestamp() + $3::bigint * interval '1 microsecond'
		WHERE key = $1 AND token = $2 AND state = 'pending'`, key, token, max(lease.Microseconds(), 1))
}

// Publish implements runtime.Leaser.
func (s *Store) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if result == nil {
		result = []byte{}
	}
	// One row when the claim is published now, or was by this token
	// already (a repeat whose first answer was lost): the second SELECT
	// reads the table as it was before the UPDATE.
	return s.fenced(ctx, "publish", `WITH p AS (UPDATE §.lease SET state = 'done', result = $3,
		expires = CASE WHEN $4::bigint > 0 THEN now() + $4::bigint * interval '1 microsecond' END
		WHERE key = $1 AND token = $2 AND state = 'pending' RETURNING 1)
		SELECT FROM p UNION ALL SELECT FROM §.lease WHERE key = $1 AND token = $2 AND state = 'done'`, key, token, result, ttlArg(keep))
}

// Release implements runtime.Leaser.
func (s *Store) Release(ctx context.Context, key string, token int64) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.fenced(ctx, "release", `DELETE FROM §.lease WHERE key = $1 AND token = $2 AND state = 'pending'`, key, token)
	return err
}

// StoreID implements runtime.SharedLeaser: every process that opens the
// store sees its claims, and they outlive the process that made them. The
// identity is the one row of the schema's identity table, inserted by the
// first process to ask; a schema dropped and created again, or another
// schema, database or server, has another one.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	id, _, err := s.StoreIDAt(ctx)
	return id, err
}

// StoreIDAt implements runtime.StoreClock: the identity (StoreID) and the
// server's time (clock_timestamp(), the clock its claims expire by), in
// one statement.
func (s *Store) StoreIDAt(ctx context.Context) (string, time.Time, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var (
		id string
		at time.Time
	)
	// A row another session inserts at the same time is not seen by the
	// statement that waited for it: the second round reads it.
	for range 2 {
		err := s.pool.QueryRow(ctx, s.q(`WITH i AS (INSERT INTO §.identity (id) VALUES ($1) ON CONFLICT (one) DO NOTHING RETURNING id)
			SELECT id, clock_timestamp() FROM (SELECT id FROM i UNION ALL SELECT id FROM §.identity) r LIMIT 1`), runtime.NewStoreID()).Scan(&id, &at)
		if !errors.Is(err, pgx.ErrNoRows) {
			if err != nil {
				return "", time.Time{}, fmt.Errorf("postgres store identity: %w", err)
			}
			return id, at, nil
		}
	}
	return "", time.Time{}, errors.New("postgres store identity: the identity row was inserted and is not visible")
}

// Doubt implements runtime.Leaser: the claim's lease ends now, its owner's
// match with it, and the row lives keep from now.
func (s *Store) Doubt(ctx context.Context, key string, token int64, keep time.Duration) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.fenced(ctx, "doubt", `UPDATE §.lease SET until = clock_timestamp(), owner = NULL,
		expires = CASE WHEN $3::bigint > 0 THEN clock_timestamp() + $3::bigint * interval '1 microsecond' END
		WHERE key = $1 AND token = $2 AND state = 'pending'`, key, token, ttlArg(keep))
}

// nowUS is the server's clock in microseconds, fixed for the statement.
const nowUS = `(extract(epoch FROM now()) * 1000000)::bigint`

// rateTAT is the tat of an existing bucket for a call at interval $2: at
// least now, and rescaled from the interval it counts in when another
// (runtime.RescaleTAT, held below 2^62 µs); rateWait is the call's wait
// for tolerance $3.
const (
	rateTAT = `CASE WHEN r.interval_us > 0 AND r.interval_us <> $2 AND r.tat > ` + nowUS + `
		THEN ` + nowUS + ` + least(ceil((r.tat - ` + nowUS + `)::numeric * $2 / r.interval_us), 4611686018427387904)::bigint
		ELSE greatest(r.tat, ` + nowUS + `) END`
	rateWait = `greatest(` + rateTAT + ` - $3 - ` + nowUS + `, 0)`
)

// Allow implements runtime.RateLimiter: GCRA in one statement. A new key is
// always admitted; an existing one is updated under its row lock, the
// decision kept in the row for RETURNING. The row keeps the interval its
// tat counts in; a call under another rescales it, and keeps it rescaled
// even when refused.
func (s *Store) Allow(ctx context.Context, key string, interval time.Duration, burst int64, maxWait time.Duration) (time.Duration, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	iv := runtime.IntervalMicros(interval)
	tol := (burst - 1) * iv
	mw := maxWait.Microseconds()
	var (
		ok   bool
		wait int64
	)
	err := s.pool.QueryRow(ctx, s.q(`
		INSERT INTO §.rate AS r (key, tat, ok, wait, interval_us) VALUES ($1, `+nowUS+` + $2, true, 0, $2)
		ON CONFLICT (key) DO UPDATE SET
			wait = `+rateWait+`,
			ok   = `+rateWait+` <= $4,
			tat  = CASE WHEN `+rateWait+` <= $4 THEN `+rateTAT+` + $2 ELSE `+rateTAT+` END,
			interval_us = $2
		RETURNING ok, wait`), key, iv, tol, mw).Scan(&ok, &wait)
	if err != nil {
		return 0, false, fmt.Errorf("postgres rate limit: %w", tooLong(err, indexed{"rate_pkey", "key", len(key)}))
	}
	s.wrote(ctx)
	if !ok {
		wait -= mw
	}
	return time.Duration(wait) * time.Microsecond, ok, nil
}

// ForgetRate implements runtime.RateLimiter.
func (s *Store) ForgetRate(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.q(`DELETE FROM §.rate WHERE key = $1`), key); err != nil {
		return fmt.Errorf("postgres rate limit: %w", err)
	}
	return nil
}

// Reserve implements runtime.Budgeter: one call of budget_reserve.
func (s *Store) Reserve(ctx context.Context, key, id string, lim runtime.BudgetLimits, ttl time.Duration) (*runtime.BudgetError, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var (
		refused         string
		tokens, ptokens float64
		usd, pusd       float64
		calls, pcalls   int64
		estTokens       *int64
		estUSD          *float64
	)
	if est := lim.Estimate; est != nil {
		n := est.Tokens()
		estTokens, estUSD = &n, &est.USD
	}
	err := s.pool.QueryRow(ctx, s.q(`SELECT o_refused, o_tokens, o_usd, o_calls, o_pcalls, o_ptokens, o_pusd
		FROM §.budget_reserve($1, $2, $3, $4, $5, $6, $7, $8, $9)`),
		key, lim.Tokens, lim.USD, lim.Calls, ttlArg(ttl), estTokens, estUSD, id, max(lim.LeaseOf().Microseconds(), 1)).
		Scan(&refused, &tokens, &usd, &calls, &pcalls, &ptokens, &pusd)
	if err != nil {
		return nil, fmt.Errorf("postgres budget reserve: %w", tooLong(err, indexed{"ledger_pkey", "key", len(key)},
			indexed{"reservation_pkey", "key and reservation id", len(key) + len(id)}))
	}
	s.wrote(ctx)
	resource, crossed := strings.CutSuffix(refused, "+")
	var e *runtime.BudgetError
	switch resource {
	case "tokens":
		e = &runtime.BudgetError{Resource: resource, Spent: tokens, Limit: float64(*lim.Tokens)}
		if crossed {
			e.Pending = ptokens
		}
	case "usd":
		e = &runtime.BudgetError{Resource: resource, Spent: usd, Limit: *lim.USD}
		if crossed {
			e.Pending = pusd
		}
	case "calls":
		e = &runtime.BudgetError{Resource: resource, Spent: float64(calls), Limit: float64(*lim.Calls), Pending: float64(pcalls)}
	default:
		return nil, nil
	}
	if crossed {
		e.Estimate = lim.EstimateOf(resource)
	}
	if e.InFlight() {
		// A ceiling the charged ledger alone reaches, or the call's
		// estimate crosses, refuses it for good (runtime.CheckBudget).
		spent := runtime.Ledger{InputTokens: int64(tokens), USD: usd, Calls: calls}
		if final := runtime.CheckBudget(spent, runtime.Ledger{InputTokens: int64(ptokens), USD: pusd, Calls: pcalls}, lim); final != nil {
			e = final
		}
	}
	return e, nil
}

// RenewReservation implements runtime.Budgeter: one statement, which locks
// only the reservation's row.
func (s *Store) RenewReservation(ctx context.Context, key, id string, lease time.Duration) (bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, s.q(`UPDATE §.reservation SET until = clock_timestamp() + $3::bigint * interval '1 microsecond'
		WHERE key = $1 AND id = $2 AND until > clock_timestamp()`), key, id, max(lease.Microseconds(), 1))
	if err != nil {
		return false, fmt.Errorf("postgres budget renew: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Settle implements runtime.Budgeter: one call of budget_settle.
func (s *Store) Settle(ctx context.Context, key, id string, c runtime.Ledger, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, s.q(`SELECT §.budget_settle($1, $2, $3, $4, $5, $6, $7)`),
		key, id, c.InputTokens, c.OutputTokens, c.USD, c.Calls, ttlArg(ttl))
	if err != nil {
		return fmt.Errorf("postgres budget settle: %w", tooLong(err, indexed{"ledger_pkey", "key", len(key)}))
	}
	return nil
}

// LedgerOf implements runtime.Budgeter: the ledger row with the holds of
// its reservations that lapsed and were not charged yet (the next reserve
// or settle of the ledger charges them).
func (s *Store) LedgerOf(ctx context.Context, key string) (runtime.Ledger, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var l runtime.Ledger
	err := s.pool.QueryRow(ctx, s.q(`SELECT l.in_tokens + g.tokens, l.out_tokens, l.usd + g.usd, l.calls + g.n FROM §.ledger l,
		LATERAL (SELECT count(*) AS n, coalesce(sum(r.tokens), 0)::bigint AS tokens, coalesce(sum(r.usd), 0) AS usd
			FROM §.reservation r WHERE r.key = l.key AND r.until <= clock_timestamp()) g
		WHERE l.key = $1 AND (l.expires IS NULL OR l.expires > now())`), key).
		Scan(&l.InputTokens, &l.OutputTokens, &l.USD, &l.Calls)
	if errors.Is(err, pgx.ErrNoRows) {
		return runtime.Ledger{}, nil
	}
	if err != nil {
		return runtime.Ledger{}, fmt.Errorf("postgres ledger: %w", err)
	}
	return l, nil
}

// ForgetLedger implements runtime.Budgeter.
func (s *Store) ForgetLedger(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.q(`WITH r AS (DELETE FROM §.reservation WHERE key = $1), s AS (DELETE FROM §.settled WHERE key = $1)
		DELETE FROM §.ledger WHERE key = $1`), key); err != nil {
		return fmt.Errorf("postgres ledger: %w", err)
	}
	return nil
}

// Append implements runtime.AuditSink: one INSERT, committed durably. Text
// PostgreSQL cannot store (a NUL character, bytes that are not UTF-8) is
// written with U+FFFD in its place (pgText, pgJSON) rather than lose the
// record; the arguments' digest is still that of the call's arguments.
//
// When the connection fails under the INSERT (a server restart, a proxy or
// a network that cut it while it sat in the pool or while the statement
// ran, its backend terminated while the statement waited for a lock), the
// record is written again on another connection, up to appendTries times
// within the store's timeout: without this the first call after the cut
// would lose its outcome record, the server being up. The first INSERT may
// have committed before its answer was lost, or may still be running on
// the server and commit later (the driver's cancel request is lost with
// the network, or comes too late), so each record carries an id of its
// own (column record, unique): the INSERT sent again waits for the first
// one's transaction, and adds nothing when it committed.
func (s *Store) Append(ctx context.Context, r runtime.AuditRecord) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("postgres audit append: %w", err)
	}
	vals, err := auditValues(r, id.String())
	if err != nil {
		return err
	}
	err = s.appendOnce(ctx, vals)
	for tries := 1; err != nil && tries < appendTries && connectionLost(ctx, err); tries++ {
		err = s.appendOnce(ctx, vals)
	}
	if err != nil {
		return fmt.Errorf("postgres audit append: %w", tooLong(err, indexed{"audit_run", "run id", len(r.RunID)},
			indexed{"audit_tool_time", "tool name", len(r.Tool)}))
	}
	return nil
}

// auditValues returns the arguments of the statement that inserts r under
// the record id id.
func auditValues(r runtime.AuditRecord, id string) ([]any, error) {
	r = storable(r)
	var args []byte
	if r.Args != nil {
		b, err := json.Marshal(r.Args)
		if err != nil {
			return nil, fmt.Errorf("postgres audit: encode args: %w", err)
		}
		args = pgJSON(b)
	}
	return []any{r.Time, r.Layer, r.Stage, r.Tool, string(r.Phase), string(r.Decision), r.ErrorType,
		r.ErrorMessage, r.Attempts, r.RunID, r.IdempotencyKey, int64(r.Duration), r.ArgsDigest, args, id}, nil
}

// appendTries bounds the statements of one Append, or one fenced write of a
// claim, whose connection failed.
const appendTries = 3

// connectionLost reports whether err is the failure of the connection
// rather than the server's refusal of the statement, with time left: an
// error the server did not send, or a FATAL one, which ends the session
// (its backend terminated, the server shutting down).
func connectionLost(ctx context.Context, err error) bool {
	var pe *pgconn.PgError
	return (!errors.As(err, &pe) || pe.Severity == "FATAL") && ctx.Err() == nil
}

// appendOnce inserts the record of vals (auditValues) unless the table
// holds its record id: the row of an INSERT whose answer was lost. An
// INSERT of that id still in progress is waited for (the unique index), so
// one that commits after its connection failed is not written twice.
func (s *Store) appendOnce(ctx context.Context, vals []any) error {
	_, err := s.pool.Exec(ctx, s.q(`INSERT INTO §.audit (time, layer, stage, tool, phase, decision, error_type,
		error_message, attempts, run_id, idempotency_key, duration_ns, args_digest, args, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::uuid)
		ON CONFLICT (record) WHERE record IS NOT NULL DO NOTHING`), vals...)
	return err
}

// Records returns the audit records in append order; a non-empty runID
// selects one run's.
func (s *Store) Records(ctx context.Context, runID string) ([]runtime.AuditRecord, error) {
	rows, err := s.pool.Query(ctx, s.q(`SELECT time, layer, stage, tool, phase, decision, error_type, error_message,
		attempts, run_id, idempotency_key, duration_ns, args_digest, args FROM §.audit
		WHERE $1 = '' OR run_id = $1 ORDER BY id`), pgText(runID))
	if err != nil {
		return nil, fmt.Errorf("postgres audit records: %w", err)
	}
	defer rows.Close()
	var out []runtime.AuditRecord
	for rows.Next() {
		var (
			r         runtime.AuditRecord
			d         int64
			phase, dc string
			args      []byte
		)
		if err := rows.Scan(&r.Time, &r.Layer, &r.Stage, &r.Tool, &phase, &dc, &r.ErrorType, &r.ErrorMessage,
			&r.Attempts, &r.RunID, &r.IdempotencyKey, &d, &r.ArgsDigest, &args); err != nil {
			return nil, fmt.Errorf("postgres audit records: %w", err)
		}
		r.Duration = time.Duration(d)
		r.Phase, r.Decision = runtime.AuditPhase(phase), runtime.AuditDecision(dc)
		if args != nil {
			if err := runtime.DecodeArgs(args, &r.Args); err != nil {
				return nil, fmt.Errorf("postgres audit records: args: %w", err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func norm(vec []float32) float64 {
	var n float64
	for _, x := range vec {
		n += float64(x) * float64(x)
	}
	return math.Sqrt(n)
}

// Upsert implements runtime.VectorIndex.
func (s *Store) Upsert(ctx context.Context, scope, id string, vec []float32, value []byte, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if len(vec) == 0 {
		return errors.New("vector index: empty vector")
	}
	if err := runtime.CheckVector(vec); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	_, err := s.pool.Exec(ctx, s.q(`INSERT INTO §.vectors (scope, id, vec, norm, value, expires)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $6::bigint > 0 THEN now() + $6::bigint * interval '1 microsecond' END)
		ON CONFLICT (scope, id) DO UPDATE SET vec = excluded.vec, norm = excluded.norm, value = excluded.value, expires = excluded.expires`),
		scope, id, vec, norm(vec), value, ttlArg(ttl))
	if err != nil {
		return fmt.Errorf("postgres vector upsert: %w", tooLong(err, indexed{"vectors_pkey", "scope and id", len(scope) + len(id)}))
	}
	s.wrote(ctx)
	return nil
}

// Query implements runtime.VectorIndex: an exact scan of the partition's
// live entries of the query's dimension.
func (s *Store) Query(ctx context.Context, scope string, vec []float32, k int) ([]runtime.VectorMatch, error) {
	if err := runtime.CheckVector(vec); err != nil {
		return nil, err
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	qn := norm(vec)
	if k <= 0 || qn == 0 {
		return nil, nil
	}
	score := `(SELECT sum(a::double precision * b) FROM unnest(vec, $2::real[]) AS t(a, b)) / (norm * $3)`
	if s.pgvector {
		score = `1 - (vec::vector <=> $2::real[]::vector)`
	}
	rows, err := s.pool.Query(ctx, s.q(`SELECT id, value, `+score+` AS score FROM §.vectors
		WHERE scope = $1 AND (expires IS NULL OR expires > now()) AND cardinality(vec) = cardinality($2::real[]) AND norm > 0 AND norm < 'Infinity'::float8
		ORDER BY score DESC, id LIMIT $4`), scope, vec, qn, k)
	if err != nil {
		return nil, fmt.Errorf("postgres vector query: %w", err)
	}
	defer rows.Close()
	var out []runtime.VectorMatch
	for rows.Next() {
		var m runtime.VectorMatch
		if err := rows.Scan(&m.ID, &m.Value, &m.Score); err != nil {
			return nil, fmt.Errorf("postgres vector query: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

var (
	_ runtime.KV           = (*Store)(nil)
	_ runtime.AuditSink    = (*Store)(nil)
	_ runtime.Leaser       = (*Store)(nil)
	_ runtime.SharedLeaser = (*Store)(nil)
	_ runtime.RateLimiter  = (*Store)(nil)
	_ runtime.Budgeter     = (*Store)(nil)
	_ runtime.VectorIndex  = (*Store)(nil)
	_ runtime.StoreBackend = (*Store)(nil)
)
