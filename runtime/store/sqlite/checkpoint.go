package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentc-dev/agentc/runtime"
)

// checkpointSchema is the table of runtime.CheckpointStore: one row per
// version of a run kept (the latest ones when saves prune), the checkpoint
// as JSON.
const checkpointSchema = `
CREATE TABLE IF NOT EXISTS checkpoints (
	run_id  TEXT NOT NULL,
	version INTEGER NOT NULL,
	time    INTEGER NOT NULL,
	status  TEXT NOT NULL,
	data    TEXT NOT NULL,
	PRIMARY KEY (run_id, version)
) WITHOUT ROWID;
`

// checkpoints creates the checkpoint table on first use; it fails as
// every operation does once the store is retired (intact).
func (s *Store) checkpoints(ctx context.Context) error {
	if err := s.gone(); err != nil {
		return err
	}
	if s.checkpointTable.Load() {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, checkpointSchema); err != nil {
		return fmt.Errorf("sqlite checkpoints: create table: %w", err)
	}
	s.checkpointTable.Store(true)
	return nil
}

// SaveCheckpoint implements runtime.CheckpointStore: one statement numbers
// the version (the run's latest plus one, read under the file's write lock),
// refuses it when the latest is terminal or, for a conditional save
// (cp.Version above 0), when it is not cp.Version; with cp.Keep above 0 a
// second deletes the run's versions older than the latest cp.Keep. Both run
// in one transaction, committed (fsynced) before SaveCheckpoint returns, so
// versions stay unique and consecutive across the processes sharing the
// file, and a crash leaves the save and its pruning both or neither. The
// row's version column is the checkpoint's version; its JSON leaves it out.
func (s *Store) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	if err := s.checkpoints(ctx); err != nil {
		return 0, err
	}
	data, err := runtime.MarshalCheckpoint(cp)
	if err != nil {
		return 0, fmt.Errorf("sqlite checkpoints: %w", err)
	}
	v, err := s.saveCheckpoint(ctx, cp, data)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, s.refused(ctx, cp)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite checkpoints: save: %w", err)
	}
	if err := s.intact(); err != nil {
		return 0, err
	}
	return v, nil
}

// saveCheckpoint inserts the version and prunes the run in one transaction
// (BEGIN IMMEDIATE: the file's write lock from its start). A refused insert
// is sql.ErrNoRows, the transaction rolled back.
func (s *Store) saveCheckpoint(ctx context.Context, cp runtime.Checkpoint, data []byte) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var v int
	err = tx.QueryRowContext(ctx, `INSERT INTO checkpoints (run_id, version, time, status, data)
		SELECT ?1, next, ?2, ?3, ?4 FROM (SELECT COALESCE(MAX(version), 0) + 1 AS next FROM checkpoints WHERE run_id = ?1)
		WHERE NOT EXISTS (SELECT 1 FROM checkpoints WHERE run_id = ?1 AND version = next - 1
			AND status IN ('done', 'failed', 'cancelled'))
			AND (?5 = 0 OR next = ?5)
		RETURNING version`, cp.RunID, cp.Time.UnixNano(), string(cp.Status), string(data), cp.Version).Scan(&v)
	if err != nil {
		return 0, err
	}
	if cp.Keep > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE run_id = ? AND version <= ?`, cp.RunID, v-cp.Keep); err != nil {
			return 0, err
		}
	}
	return v, tx.Commit()
}

// refused is the error of a save the insert refused: the run's latest
// version is terminal, or not the one before the version a conditional
// save asked for.
func (s *Store) refused(ctx context.Context, cp runtime.Checkpoint) error {
	var (
		v      int
		status string
	)
	err := s.db.QueryRowContext(ctx, `SELECT version, status FROM checkpoints WHERE run_id = ? ORDER BY version DESC LIMIT 1`, cp.RunID).Scan(&v, &status)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite checkpoints: save: %w", err)
	}
	return fmt.Errorf("sqlite checkpoints: save: %w", runtime.SaveRefusal(cp, v, runtime.RunStatus(status)))
}

func (s *Store) checkpoint(ctx context.Context, q string, args ...any) (runtime.Checkpoint, bool, error) {
	if err := s.checkpoints(ctx); err != nil {
		return runtime.Checkpoint{}, false, err
	}
	var (
		v            int
		status, data string
	)
	err := s.db.QueryRowContext(ctx, q, args...).Scan(&v, &status, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return runtime.Checkpoint{}, false, nil
	}
	if err != nil {
		return runtime.Checkpoint{}, false, fmt.Errorf("sqlite checkpoints: %w", err)
	}
	cp, err := runtime.UnmarshalStoredCheckpoint([]byte(data), v, status)
	if err != nil {
		return runtime.Checkpoint{}, false, fmt.Errorf("sqlite checkpoints: %w", err)
	}
	return cp, true, nil
}

// LatestCheckpoint implements runtime.CheckpointStore.
func (s *Store) LatestCheckpoint(ctx context.Context, runID string) (runtime.Checkpoint, bool, error) {
	return s.checkpoint(ctx, `SELECT version, status, data FROM checkpoints WHERE run_id = ? ORDER BY version DESC LIMIT 1`, runID)
}

// LatestCheckpointHead implements runtime.CheckpointHeads: the latest
// version's number and status, without its data.
func (s *Store) LatestCheckpointHead(ctx context.Context, runID string) (int, runtime.RunStatus, bool, error) {
	if err := s.checkpoints(ctx); err != nil {
		return 0, "", false, err
	}
	var (
		v      int
		status string
	)
	err := s.db.QueryRowContext(ctx, `SELECT version, status FROM checkpoints WHERE run_id = ? ORDER BY version DESC LIMIT 1`, runID).Scan(&v, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("sqlite checkpoints: %w", err)
	}
	return v, runtime.RunStatus(status), true, nil
}

// CheckpointAt implements runtime.CheckpointStore.
func (s *Store) CheckpointAt(ctx context.Context, runID string, version int) (runtime.Checkpoint, bool, error) {
	return s.checkpoint(ctx, `SELECT version, status, data FROM checkpoints WHERE run_id = ? AND version = ?`, runID, version)
}

// CheckpointVersions implements runtime.CheckpointStore.
func (s *Store) CheckpointVersions(ctx context.Context, runID string) ([]int, error) {
	if err := s.checkpoints(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT version FROM checkpoints WHERE run_id = ? ORDER BY version`, runID)
	if err != nil {
		return nil, fmt.Errorf("sqlite checkpoints: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqlite checkpoints: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DeleteCheckpoints implements runtime.CheckpointStore.
func (s *Store) DeleteCheckpoints(ctx context.Context, runID string) error {
	if err := s.checkpoints(ctx); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM checkpoints WHERE run_id = ?`, runID); err != nil {
		return fmt.Errorf("sqlite checkpoints: delete: %w", err)
	}
	return s.intact()
}

var (
	_ runtime.CheckpointStore = (*Store)(nil)
	_ runtime.CheckpointHeads = (*Store)(nil)
)
