// Package gls computes the generalised least-squares estimate of linear
// queries on a product domain from noisy measurements subject to exact
// ones (invariants), where every set of queries is a Kronecker product of
// one factor per dimension (query.Term).
package gls
