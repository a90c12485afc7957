package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentc-dev/agentc/runtime"
)

// checkpointSchema is the table of runtime.CheckpointStore: one row per
// version of a run kept (the latest ones when saves prune), the checkpoint
// as JSON (without its version, which is the row's). The JSON is kept as
// text, not jsonb: jsonb refuses a NUL character (\u0000), which a
// transcript may hold.
const checkpointSchema = `
CREATE TABLE IF NOT EXISTS §.checkpoints (
	run_id  text NOT NULL,
	version integer NOT NULL,
	time    timestamptz NOT NULL,
	status  text NOT NULL,
	data    text NOT NULL,
	PRIMARY KEY (run_id, version)
)`

// checkpoints creates the checkpoint table on first use, under the lock
// that serialises the schema's migrations across processes. A table an
// earlier version created with a jsonb data column is converted to text
// (the same JSON) in that transaction.
func (s *Store) checkpoints(ctx context.Context) error {
	if s.checkpointTable.Load() {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agentc schema ' || $1))`, s.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(checkpointSchema)); err != nil {
			return err
		}
		var typ string
		err := tx.QueryRow(ctx, `SELECT data_type FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = 'checkpoints' AND column_name = 'data'`, s.schema).Scan(&typ)
		if err != nil {
			return err
		}
		if typ == "jsonb" {
			_, err = tx.Exec(ctx, s.q(`ALTER TABLE §.checkpoints ALTER COLUMN data TYPE text USING data::text`))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres checkpoints: create table: %w", err)
	}
	s.checkpointTable.Store(true)
	return nil
}

// maxSaveRetries bounds the retries of a save that lost the race for a
// version number to another process.
const maxSaveRetries = 16

// SaveCheckpoint implements runtime.CheckpointStore: the version is the
// run's latest plus one, taken in the insert itself, which refuses it when
// the latest is terminal or, for a conditional save (cp.Version above 0),
// when it is not cp.Version; two processes that race for one number leave
// one of them a unique violation, and it takes the next (a conditional
// save is refused instead). With cp.Keep above 0 the same statement deletes
// the run's versions older than the latest cp.Keep, so the save and its
// pruning commit together; a deadlock between two saves pruning one run
// aborts one statement whole, which is tried again. The row is committed
// before SaveCheckpoint returns.
func (s *Store) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.checkpoints(ctx); err != nil {
		return 0, err
	}
	data, err := runtime.MarshalCheckpoint(cp)
	if err != nil {
		return 0, fmt.Errorf("postgres checkpoints: %w", err)
	}
	for range maxSaveRetries {
		var v int
		// The saves of one run take turns (a transaction-scoped advisory
		// lock on the schema and run), so the statement below reads the
		// run as the save before it left it. Without them, a statement that
		// read the run before the others inserted and pruned it could
		// insert a version they had already pruned, which no conflict was
		// left to refuse: its version reported twice, its checkpoint lost
		// at the next prune, a conditional save let through over a run
		// another process had moved on.
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "agentc checkpoints "+s.schema+" "+cp.RunID); err != nil {
				return err
			}
			return tx.QueryRow(ctx, s.q(`WITH ins AS (INSERT INTO §.checkpoints (run_id, version, time, status, data)
			SELECT $1, next, $2, $3, $4 FROM (SELECT COALESCE(MAX(version), 0) + 1 AS next FROM §.checkpoints WHERE run_id = $1) n
			WHERE NOT EXISTS (SELECT 1 FROM §.checkpoints WHERE run_id = $1 AND version = next - 1
				AND status IN ('done', 'failed', 'cancelled'))
				AND ($5::integer = 0 OR next = $5::integer)
			RETURNING version),
			pruned AS (DELETE FROM §.checkpoints c USING ins
				WHERE $6::integer > 0 AND c.run_id = $1 AND c.version <= ins.version - $6::integer)
			SELECT version FROM ins`), cp.RunID, cp.Time, string(cp.Status), string(data), cp.Version, cp.Keep).Scan(&v)
		})
		var pe *pgconn.PgError
		if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pe) && pe.Code == "23505" && cp.Version > 0 {
			return 0, s.refused(ctx, cp)
		}
		if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "40P01") {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("postgres checkpoints: save: %w", err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("postgres checkpoints: save run %s: lost the race for a version %d times", cp.RunID, maxSaveRetries)
}

// refused is the error of a save the insert refused: the run's latest
// version is terminal, or not the one before the version a conditional
// save asked for.
func (s *Store) refused(ctx context.Context, cp runtime.Checkpoint) error {
	var (
		v      int
		status string
	)
	err := s.pool.QueryRow(ctx, s.q(`SELECT version, status FROM §.checkpoints WHERE run_id = $1 ORDER BY version DESC LIMIT 1`), cp.RunID).Scan(&v, &status)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres checkpoints: save: %w", err)
	}
	return fmt.Errorf("postgres checkpoints: save: %w", runtime.SaveRefusal(cp, v, runtime.RunStatus(status)))
}

func (s *Store) checkpoint(ctx context.Context, q string, args ...any) (runtime.Checkpoint, bool, error) {
	if err := s.checkpoints(ctx); err != nil {
		return runtime.Checkpoint{}, false, err
	}
	var (
		v      int
		status string
		data   []byte
	)
	err := s.pool.QueryRow(ctx, s.q(q), args...).Scan(&v, &status, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return runtime.Checkpoint{}, false, nil
	}
	if err != nil {
		return runtime.Checkpoint{}, false, fmt.Errorf("postgres checkpoints: %w", err)
	}
	cp, err := runtime.UnmarshalStoredCheckpoint(data, v, status)
	if err != nil {
		return runtime.Checkpoint{}, false, fmt.Errorf("postgres checkpoints: %w", err)
	}
	return cp, true, nil
}

// LatestCheckpoint implements runtime.CheckpointStore.
func (s *Store) LatestCheckpoint(ctx context.Context, runID string) (runtime.Checkpoint, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.checkpoint(ctx, `SELECT version, status, data FROM §.checkpoints WHERE run_id = $1 ORDER BY version DESC LIMIT 1`, runID)
}

// LatestCheckpointHead implements runtime.CheckpointHeads: the latest
// version's number and status, without its data.
func (s *Store) LatestCheckpointHead(ctx context.Context, runID string) (int, runtime.RunStatus, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.checkpoints(ctx); err != nil {
		return 0, "", false, err
	}
	var (
		v      int
		status string
	)
	err := s.pool.QueryRow(ctx, s.q(`SELECT version, status FROM §.checkpoints WHERE run_id = $1 ORDER BY version DESC LIMIT 1`), runID).Scan(&v, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("postgres checkpoints: %w", err)
	}
	return v, runtime.RunStatus(status), true, nil
}

// CheckpointAt implements runtime.CheckpointStore.
func (s *Store) CheckpointAt(ctx context.Context, runID string, version int) (runtime.Checkpoint, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.checkpoint(ctx, `SELECT version, status, data FROM §.checkpoints WHERE run_id = $1 AND version = $2`, runID, version)
}

// CheckpointVersions implements runtime.CheckpointStore.
func (s *Store) CheckpointVersions(ctx context.Context, runID string) ([]int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.checkpoints(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q(`SELECT version FROM §.checkpoints WHERE run_id = $1 ORDER BY version`), runID)
	if err != nil {
		return nil, fmt.Errorf("postgres checkpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("postgres checkpoints: %w", err)
	}
	return out, nil
}

// DeleteCheckpoints implements runtime.CheckpointStore.
func (s *Store) DeleteCheckpoints(ctx context.Context, runID string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if err := s.checkpoints(ctx); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.q(`DELETE FROM §.checkpoints WHERE run_id = $1`), runID); err != nil {
		return fmt.Errorf("postgres checkpoints: delete: %w", err)
	}
	return nil
}

var (
	_ runtime.CheckpointStore = (*Store)(nil)
	_ runtime.CheckpointHeads = (*Store)(nil)
)
