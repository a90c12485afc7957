
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
