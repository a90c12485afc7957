
-- Each audit record carries an id its appending process gave it: an
-- INSERT sent again after its connection failed, while the first one may
-- still commit on the server, waits for that one's transaction on the
-- unique index and adds no second row. NULL in the rows of older builds,
-- which the partial index leaves out; older builds, which name the columns
-- they write, go on appending beside.
ALTER TABLE %[1]s.audit ADD COLUMN IF NOT EXISTS record uuid;
CREATE UNIQUE INDEX IF NOT EXISTS audit_record ON %[1]s.audit (record) WHERE record IS NOT NULL;
