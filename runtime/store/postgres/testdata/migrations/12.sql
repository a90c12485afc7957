
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
