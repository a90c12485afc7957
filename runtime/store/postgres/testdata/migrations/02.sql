
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
