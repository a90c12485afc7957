
-- The interval (microseconds) a bucket's tat counts in: a call under
-- another rescales it (runtime.RescaleTAT). NULL in the rows of older
-- builds, which the next call takes to count in its own interval; older
-- builds, which name the columns they write, go on working beside.
ALTER TABLE %[1]s.rate ADD COLUMN IF NOT EXISTS interval_us bigint;
