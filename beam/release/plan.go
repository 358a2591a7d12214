package release

import "github.com/knowdp/knowdp/cube"

// plan returns the release's plan as the single machine makes it
// (cube.PlanRelease): the sensitivity, the noise and its margin of error,
// and the privacy story, Laplace or Gaussian.
func plan(s *cube.Schema, spec Spec) (*cube.Release, error) {
	return cube.PlanRelease(s, cube.ReleaseSpec{Epsilon: spec.Epsilon, Exact: spec.Exact, Cuboid: spec.Cuboid,
		Mechanism: spec.Mechanism, Rho: spec.Rho, Delta: spec.Delta}, spec.Seeded)
}
