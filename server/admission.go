package server

import (
	"context"
	"slices"

	splitplan "github.com/knowdp/knowdp/plan"
	"github.com/knowdp/knowdp/privacy"
	"github.com/knowdp/knowdp/server/admission"
)

// Admission. Planning a query (expanding a linear query to its base cells,
// hashing it, choosing a workload's shares) costs CPU before anything is
// charged, so a query is first priced from the request alone: floorCharge
// is a lower bound of its cost from the request, the public schema and
// policy and the analyst's own budget. When even that exceeds the remaining
// budget the query can only be answered from the ledger (a repeat), and it
// is planned to look for its stored answer only when that is cheap (at most
// admission.MaxProbeWork base cells) or when its Idempotency-Key names a
// stored answer; otherwise it is refused before any planning. The work of a
// refused query that was planned is charged to the key's rate limit (one
// request per admission.WorkPerToken base cells; package admission keeps
// the counts).

// floorCharge returns a lower bound, in steps, of what q costs on d, from
// the request and the dataset's public schema and policy alone. For a
// linear query, which Protocol 1 may charge less than its epsilon, it
// returns 0 and the query's epsilon in steps, linearEps: the caller lowers
// that by the spread of the analyst's per-cell losses. An invalid request
// gives 0: planning refuses it with its reason.
func floorCharge(d *dataset, q QueryRequest) (floor, linearEps int64) {
	if q.Mechanism == "gaussian" {
		rho, err := privacy.NewRho(q.Rho)
		if err != nil || !d.zcdp || q.Kind != "cuboid" || d.publicCuboids(q) {
			return 0, 0
		}
		return rho.Steps(), 0
	}
	eps, err := privacy.NewEpsilon(q.Epsilon)
	if err != nil {
		return 0, 0
	}
	switch {
	case q.Kind == "cuboid" && d.publicCuboids(q):
		return 0, 0
	case q.Kind == "cuboid" && d.zcdp:
		return privacy.PureAsRho(eps).RhoSteps(), 0
	case d.zcdp:
		return 0, 0 // refused by planning
	case q.Kind == "cuboid", q.Kind == "prior", q.Kind == "dx" && d.hasMetric():
		return epsSteps(eps), 0
	case q.Kind == "linear" && d.sens.Value > 0:
		return 0, epsSteps(eps)
	}
	return 0, 0
}

// linearFloor is the least a linear query at linearEps steps costs on a
// budget whose per-cell losses range over [lo, hi]: the cell with the
// largest coefficient sum gains linearEps (up to rounding, 2 steps), and its
// loss was at least lo.
func linearFloor(linearEps, lo, hi int64) int64 {
	return max(0, linearEps-2-(hi-lo))
}

// publicCuboids reports whether a cuboid query asks only for cuboids the
// invariants determine (released exactly, free). Invalid cuboids give
// false.
func (d *dataset) publicCuboids(q QueryRequest) bool {
	names := cuboidLists(q)
	if len(names) == 0 || len(names) > maxWorkloadCuboids {
		return false
	}
	views, ok := d.queryViews(q)
	if !ok {
		return false
	}
	for _, v := range views {
		if !d.viewPublic(v) {
			return false
		}
	}
	return true
}

// planWork estimates, from the request alone, the planning work of q in
// base cells: the cells its linear queries select (counted, not
// enumerated), or the cells of the cuboids it asks for. The sum stops
// growing past maxNonZeros.
func planWork(d *dataset, q QueryRequest) int {
	s := d.schema
	work := 0
	var queries []LinearQuery
	switch {
	case q.Query != nil:
		queries = []LinearQuery{*q.Query}
	case q.Queries != nil:
		queries = q.Queries
	}
	for _, lq := range queries {
		for _, t := range lq.Terms {
			size := 1
			for i := range s.NumDims() {
				n := s.Size(i)
				if vals, ok := t.Where[s.Dim(i).Name]; ok {
					n = len(vals)
				}
				size *= n
				if size > maxNonZeros {
					return maxNonZeros + 1
				}
			}
			if work += size; work > maxNonZeros {
				return maxNonZeros + 1
			}
		}
	}
	names := slices.Clip(q.Cuboids)
	if q.Cuboid != nil {
		names = append(names, q.Cuboid)
	}
	for _, n := range names {
		// A view at a coarser level is counted at its finest (the cuboid
		// it is rolled up from).
		if v, err := s.ViewOfNames(n...); err == nil {
			if work += s.CuboidSize(v.Dims); work > maxNonZeros {
				return maxNonZeros + 1
			}
		}
	}
	return work
}

// splitWorkPerCell converts the split solvers' work (plan.Result.Work's
// unit, in which cube's SplitWork bounds it) to the rate limiter's unit,
// base cells of planning (admission.WorkPerToken): planning a linear query
// takes about 65 ns of CPU per base cell, a unit of the solvers' work about
// 2.4 ns (BenchmarkPlanCells here and BenchmarkSplitWorkUnits in cube, on
// the 2-core development machine; on the same machine loaded, 110-130 and
// 4.3-4.8 ns: the ratio, 27, holds).
const splitWorkPerCell = 27

// splitCells converts the split solvers' work to base cells of planning.
func splitCells(work float64) int {
	return int(min(work/splitWorkPerCell, 1<<40))
}

// prepare runs the plan's costly preparation (the optimal split's solver)
// once the query is affordable and not a repeat, under the request's
// context bounded by the compute timeout: a client that goes away, or a
// deadline, stops it, and no budget is charged for it (it depends on the
// request and public data only). A preparation whose bound (pl.work, known
// from the request before it starts) is large (admission.HeavyPrepare)
// waits for a heavy slot, so that such preparations never take every core.
// One that does not end in an answer (an input error it finds, a client that left, a deadline)
// costs the key's rate limit the work the solvers did, which they count
// (plan.Meter): a function of the request alone, at most its bound.
func (s *Server) prepare(ctx context.Context, keyID string, pl *plan) error {
	if pl.work > admission.HeavyPrepare {
		release, err := s.adm.Heavy(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ComputeTimeout)
	defer cancel()
	var meter splitplan.Meter
	pctx = splitplan.WithMeter(pctx, &meter)
	s.prepared.Add(1)
	err := pl.prepare(pctx)
	if err != nil {
		s.adm.ChargeRefused(keyID, splitCells(meter.Work()))
		if ctx.Err() == nil && pctx.Err() != nil {
			return context.DeadlineExceeded // the compute timeout, not the client's
		}
	}
	return err
}

// computeContext returns the context a query is computed under once it has
// been admitted: it ignores the client (a client that goes away is charged
// all the same, so disconnecting at a chosen moment teaches nothing for
// free) and ends when the server closes or Config.ComputeTimeout after
// admission, a bound that does not depend on the data.
func (s *Server) computeContext(req context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req), s.cfg.ComputeTimeout)
	stop := context.AfterFunc(s.life, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
