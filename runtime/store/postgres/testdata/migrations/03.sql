
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
