package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// SpendingPoint is an analyst's budget on a dataset over one interval (or
// at one answer or budget change): the answers and changes in it, what
// they charged, and the budget at its end.
type SpendingPoint struct {
	Start         time.Time `json:"start"`
	Queries       int       `json:"queries"`
	BudgetChanges int       `json:"budget_changes"`
	ChargedSteps  int64     `json:"charged_steps"`
	Charged       float64   `json:"charged"`
	SpentSteps    int64     `json:"spent_steps"`
	Spent         float64   `json:"spent"`
	TotalSteps    int64     `json:"total_steps"`
	Total         float64   `json:"total"`
}

// SpendingEvent is one answer (charge) or budget change, as Spending reads
// it from the ledger and the audit trail.
type SpendingEvent struct {
	at          int64
	charge      int64
	spentAfter  int64
	totalBefore int64
	totalAfter  int64
	change      bool
}

// Spending returns the analyst's answers and budget changes, per dataset
// (one dataset when given), in time order, and their current budgets.
func (db *DB) Spending(ctx context.Context, analyst, dataset string) (map[string][]SpendingEvent, map[string]Budget, error) {
	filter, args := "analyst_id = ?", []any{analyst}
	if dataset != "" {
		filter, args = filter+" AND dataset_id = ?", append(args, dataset)
	}
	events := map[string][]SpendingEvent{}
	rows, err := db.r.QueryContext(ctx, db.d.q(`SELECT dataset_id, created_at, charge_steps, spent_after_steps FROM ledger WHERE `+filter+` ORDER BY seq`), args...)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var ds string
		var e SpendingEvent
		if err := rows.Scan(&ds, &e.at, &e.charge, &e.spentAfter); err != nil {
			rows.Close()
			return nil, nil, err
		}
		events[ds] = append(events[ds], e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = db.r.QueryContext(ctx, db.d.q(`SELECT dataset_id, created_at, details FROM admin_audit WHERE action = 'budget.changed' AND `+filter+` ORDER BY seq`), args...)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var ds, details string
		e := SpendingEvent{change: true}
		if err := rows.Scan(&ds, &e.at, &details); err != nil {
			rows.Close()
			return nil, nil, err
		}
		var d struct {
			Before int64 `json:"total_before_steps"`
			After  int64 `json:"total_after_steps"`
		}
		if err := json.Unmarshal([]byte(details), &d); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("audit trail: budget change: %w", err)
		}
		e.totalBefore, e.totalAfter = d.Before, d.After
		events[ds] = append(events[ds], e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	budgets := map[string]Budget{}
	rows, err = db.r.QueryContext(ctx, db.d.q(`SELECT dataset_id, total_steps, spent_steps FROM budgets WHERE `+filter), args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var ds string
		var b Budget
		if err := rows.Scan(&ds, &b.Total, &b.Spent); err != nil {
			return nil, nil, err
		}
		budgets[ds] = b
	}
	return events, budgets, rows.Err()
}

// Series buckets one dataset's events (in time order once sorted here):
// bucket "query" gives every answer and budget change its own point,
// "hour" and "day" sum them per UTC hour or day. Only the last limit points
// are kept; truncated says whether older ones were left out. current is the
// budget now, the total before the first change is read from that change.
func Series(events []SpendingEvent, current Budget, bucket string, limit int) ([]SpendingPoint, bool) {
	slices.SortStableFunc(events, func(a, b SpendingEvent) int { return cmp.Compare(a.at, b.at) })
	total := current.Total
	for _, e := range events {
		if e.change {
			total = e.totalBefore // the total before the first change
			break
		}
	}
	var spent int64
	points := []SpendingPoint{}
	truncated := false
	for _, e := range events {
		start := time.Unix(0, e.at).UTC()
		switch bucket {
		case "hour":
			start = start.Truncate(time.Hour)
		case "day":
			start = time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC)
		}
		if n := len(points); n == 0 || bucket == "query" || !points[n-1].Start.Equal(start) {
			points = append(points, SpendingPoint{Start: start})
			if len(points) > 2*limit {
				points, truncated = append(points[:0], points[len(points)-limit:]...), true
			}
		}
		p := &points[len(points)-1]
		if e.change {
			p.BudgetChanges++
			total = e.totalAfter
		} else {
			p.Queries++
			p.ChargedSteps += e.charge
			spent = e.spentAfter
		}
		p.SpentSteps, p.TotalSteps = spent, total
	}
	if len(points) > limit {
		points, truncated = points[len(points)-limit:], true
	}
	for i := range points {
		p := &points[i]
		p.Charged, p.Spent, p.Total = stepsValue(p.ChargedSteps), stepsValue(p.SpentSteps), stepsValue(p.TotalSteps)
	}
	return points, truncated
}
