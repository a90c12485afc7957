
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
