package release

import (
	"context"

	"github.com/knowdp/knowdp/domain"
)

// planLattice plans the lattice strategy (Laplace noise): nil when it does
// not apply.
func planLattice(ctx context.Context, s *domain.Schema, spec WorkloadSpec, req *workloadPlan) (*workloadPlan, error) {
	return nil, nil
}
