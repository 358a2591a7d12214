package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// DatasetRecord is a registered dataset as stored: its schema, policy and
// source as JSON and its counts encoded by the server, which checks them
// again when it loads them. Counts are the exact data: the database file
// is private (OpenSQLite).
type DatasetRecord struct {
	ID, Name               string
	Schema, Policy, Source string
	Counts                 []byte
	// Rows is the number of rows counted; Budget each analyst's budget in
	// steps.
	Rows, Budget int64
	Created      time.Time
}

// RegisterDataset stores a new dataset and records its registration by
// actor in the audit trail, with details, in one transaction. An id in use
// (by a retired dataset too: ids are never reused) is an error of the
// database's; Dataset then finds the dataset that holds it.
func (db *DB) RegisterDataset(ctx context.Context, actor string, d DatasetRecord, details any) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO datasets (id, name, schema_json, policy_json, source_json, counts, total_rows, budget_steps, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			d.ID, d.Name, d.Schema, d.Policy, d.Source, d.Counts, d.Rows, d.Budget, d.Created.UnixNano()); err != nil {
			return err
		}
		return db.audit(ctx, tx, AuditEvent{Actor: actor, Action: "dataset.registered", Dataset: d.ID}, details)
	})
}

// Dataset reads a dataset back, or ErrNotFound.
func (db *DB) Dataset(ctx context.Context, id string) (DatasetRecord, error) {
	d := DatasetRecord{ID: id}
	var created int64
	err := db.r.QueryRowContext(ctx, db.d.q(`SELECT name, schema_json, policy_json, source_json, counts, total_rows, budget_steps, created_at FROM datasets WHERE id = ?`), id).
		Scan(&d.Name, &d.Schema, &d.Policy, &d.Source, &d.Counts, &d.Rows, &d.Budget, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return DatasetRecord{}, ErrNotFound
	}
	if err != nil {
		return DatasetRecord{}, err
	}
	d.Created = time.Unix(0, created).UTC()
	return d, nil
}

// RetiredAt returns when the dataset was retired (Unix nanoseconds), or 0
// while it is in service (ErrNotFound if there is no such dataset). It
// reads the database every time: another server process sharing it may
// have retired the dataset.
func (db *DB) RetiredAt(ctx context.Context, id string) (int64, error) {
	var retired sql.NullInt64
	err := db.readRow(ctx, `SELECT retired_at FROM datasets WHERE id = ?`, id).Scan(&retired)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return retired.Int64, err
}

// DatasetIDs lists the registered datasets in id order, retired ones too.
func (db *DB) DatasetIDs(ctx context.Context) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id FROM datasets ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
