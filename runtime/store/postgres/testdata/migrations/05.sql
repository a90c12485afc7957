
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
