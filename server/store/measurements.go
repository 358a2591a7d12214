package store

import (
	"context"
	"fmt"
)

// Measurement is the noisy measurements stored with one answer (see
// Entry.Measurements), as the server recorded them.
type Measurement struct {
	LedgerID string
	Record   string
}

// MeasurementIDs lists the ledger ids of the analyst's answers on the
// dataset that have measurements, in ledger order, without reading them.
func (db *DB) MeasurementIDs(ctx context.Context, analyst, dataset string) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, db.d.q(`SELECT ledger_id FROM measurements WHERE analyst_id = ? AND dataset_id = ? ORDER BY seq, ledger_id`), analyst, dataset)
	if err != nil {
		return nil, fmt.Errorf("measurements: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("measurements: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("measurements: %w", err)
	}
	return ids, nil
}

// MeasurementRecord returns the measurements stored with one answer.
func (db *DB) MeasurementRecord(ctx context.Context, ledgerID string) (string, error) {
	var raw string
	if err := db.readRow(ctx, `SELECT record FROM measurements WHERE ledger_id = ?`, ledgerID).Scan(&raw); err != nil {
		return "", fmt.Errorf("measurements of %s: %w", ledgerID, err)
	}
	return raw, nil
}

// Measurements reads all of the analyst's stored measurements on the
// dataset, in ledger order.
func (db *DB) Measurements(ctx context.Context, analyst, dataset string) ([]Measurement, error) {
	rows, err := db.r.QueryContext(ctx, db.d.q(`SELECT ledger_id, record FROM measurements WHERE analyst_id = ? AND dataset_id = ? ORDER BY seq, ledger_id`), analyst, dataset)
	if err != nil {
		return nil, fmt.Errorf("measurements: %w", err)
	}
	defer rows.Close()
	var out []Measurement
	for rows.Next() {
		var m Measurement
		if err := rows.Scan(&m.LedgerID, &m.Record); err != nil {
			return nil, fmt.Errorf("measurements: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("measurements: %w", err)
	}
	return out, nil
}
