
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
