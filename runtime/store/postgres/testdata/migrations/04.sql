
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
