
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
