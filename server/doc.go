// Package server is knowdp's interactive query server: the interactive access
// mechanism of paper 2 (Soria-Comas and Domingo-Ferrer, Section 5) over HTTP,
// with the query kinds of the other papers, per-analyst budgets and a durable
// ledger. "knowdp serve" runs it.
//
// # Roles
//
// A curator (the admin key) registers datasets — a schema, a source counted
// once into a cube (a CSV file, or a table in SQLite or PostgreSQL aggregated
// with GROUP BY in its database), and a policy: each analyst's epsilon, the
// invariants (cuboids published exactly) and optionally a d_X metric — and
// creates analysts with API keys. Analysts see the datasets, their schemas and
// published invariants, their own budget and history, and ask queries:
//
//   - cuboid: a noisy cuboid consistent with the invariants (release.Release,
//     paper 3), or a workload of cuboids; a hierarchical dimension may
//     stand at a coarser level ("geo:state"), in a query or an invariant,
//     and such views are released under one budget and one estimate
//     (release.NewPlan, docs/hierarchy.md);
//   - linear: integer-weighted counting queries over the base cuboid with
//     discrete Laplace noise and Protocol 1 accounting, optionally refined
//     with every equality the invariants imply on the answers (refine,
//     paper 1);
//   - prior: prior-knowledge refinement of one linear query (or its fraction
//     of the rows) under Protocol 2 (prior, paper 2);
//   - dx: d_X-private Laplace answers under the dataset's attribute metric
//     (metricdp, paper 4).
//
// # One neighbour relation
//
// Every answer's guarantee is stated for the neighbours the dataset's
// invariants induce (tables that agree on them and differ by a minimal move;
// add/remove one row when there are none), the relation of paper 3 under
// which publishing the invariants exactly is consistent with differential
// privacy. Under add/remove neighbours nothing released beside exact
// invariants could be private, so paper 1's calibration for constraints whose
// constants move with the data (refine.Linear.Calibrate) does not apply: the
// invariants are the same for every pair of induced neighbours, refining with
// them is post-processing (refine's public equalities), and the price of the
// knowledge is paid in the noise instead. Induced neighbours' base cuboids
// differ by a vector g with ||g||_1 <= S, the generic sensitivity of the base
// cuboid (sensitivity.GenericSensitivity), so a linear request's loss is at most S
// times its add/remove loss, and its noise is calibrated with that factor.
// Prior refinement holds for any two tables, so for this relation too. A
// d_X answer's guarantee is d_X privacy (a record moving from u to v); its
// epsilon multiplies the curator's metric.
//
// # Accounting
//
// Budgets and charges are integer counts of privacy.EpsilonStep (2^-40), in
// the budgets and ledger tables, so sums are exact. Each analyst has one
// budget per dataset, spent by:
//
//   - cuboid, prior and dx answers: their epsilon, composed sequentially
//     (a cuboid computable from the invariants is public and free);
//   - linear answers: Protocol 1, generalised to a scale lambda_j per request
//     (lambda_j = S * Delta_j / eps_j, Delta_j the request's L1 sensitivity).
//     The server keeps, per base cell c, L_c = sum over answered requests of
//     S * sum_i |W_ic| / lambda_j (rounded up to a step, exactly), and the
//     loss of all linear answers is max_c L_c. A request is charged what it
//     adds to that maximum: a request on fresh cells costs its eps, one on
//     cells disjoint from every earlier request's costs nothing more than the
//     maximum already paid (parallel composition), and with equal scales it
//     is exactly the paper's Delta(f_1, ..., f_i)/lambda. The per-request
//     scale is the paper's own suggestion (end of Section 5.1) with the tight
//     per-cell sum instead of sum_j Delta(f_j)/lambda_j.
//
// Spent is therefore the sequential part plus max_c L_c, and the sum of the
// ledger's charges equals it.
//
// # The ledger
//
// A query is canonicalised (expanded to its coefficients per base cell, eps on
// the step grid, the prior re-encoded) and hashed. If the analyst asked the
// same query on the dataset before, or sent the same Idempotency-Key, the
// stored answer is returned at no cost: asking again cannot average noise
// away. Otherwise the answer is computed in memory, and one transaction locks
// the analyst's budget row (SELECT ... FOR UPDATE on PostgreSQL, BEGIN
// IMMEDIATE on SQLite), looks for the query again, checks that the charge
// fits, inserts the ledger row with the full answer and updates the budget;
// only after the commit is the answer written to the client. Unique
// constraints on (analyst, dataset, query hash) and (analyst, idempotency
// key) make concurrent duplicates resolve to one stored answer (the losing
// computation is discarded unseen), and a CHECK keeps spent <= total. Refused
// queries charge nothing and are not stored. SQLite runs in WAL mode with
// synchronous=FULL: a commit is on disk before the answer leaves.
//
// # Kept measurements
//
// A flat cuboid or workload answer is stored with its noisy measurements
// (measurements.go), in the transaction of its charge. A later one-cuboid query of
// the same analyst whose cuboid one of their measured cuboids contains is
// answered by the least-squares estimate from all their measurements of
// its mechanism and the invariants, charged 0: post-processing of answers
// the analyst holds. It is decided before planning, from the request and
// the analyst's earlier answers only, and stored once per cuboid. The
// response says that the budget asked for was not spent, the answer's
// margin of error, and what a fresh measurement would cost and how
// accurate it would be; "fresh": true buys it instead.
//
// # Admission
//
// A query is priced from the request alone before it is planned (a lower
// bound of its cost from the request, the public schema and policy and the
// analyst's own budget), so an unaffordable query is refused without the
// work of planning it, unless it may be a cheap repeat; the planning work
// of a refused query counts against its key's rate limit. A workload's
// optimal split, the costly part of planning, is solved only once the
// query is affordable and not a repeat, under the request's context (a
// client that leaves stops it, and nothing is charged), within a budget of
// work known from the request (cube's SplitWork); the work it did counts
// against the key's rate limit when it ends in no answer. Once planned,
// affordable and within the analyst's quotas, a query is admitted: it is
// computed under a context that ignores the client and ends at a timeout
// that does not depend on the data, and charged and stored whatever the
// client does, so that disconnecting at a chosen moment teaches nothing for
// free. A computation that fails or times out is charged like an answer;
// a storage failure is a 503 that charged nothing (a retry with the same
// Idempotency-Key returns an answer whose commit the failure hid).
//
// # Operating
//
// The curator's admin API, and the console at /admin/ that drives it, also
// retire datasets (no new query; nothing deleted, the id never reused),
// change an analyst's budget in exact steps (one transaction locking the
// budget row, never below what was spent) and show an analyst's spending
// over time. Every change an admin key makes is recorded in the audit
// trail, the table admin_audit of the same store, in the transaction of the
// change, with the id of the key that made it.
//
// # Security
//
// API keys are kdp_<id>_<secret> with 256 random bits of secret, shown once;
// the store keeps SHA-256 of the secret, looked up by the non-secret id and
// compared in constant time. Curator and analyst routes need their own
// role; analysts see only their own answers. Requests have body size limits,
// deadlines and a per-key token bucket; bodies are decoded with exact field
// names (case variants, unknown fields, duplicate keys and values of the
// wrong JSON type are refused); logs carry key ids, never keys.
// tlsconfig.Load serves TLS 1.2+ (ECDHE, AEAD) from certificate files reloaded
// when renewed; knowdp serve refuses plain HTTP off the loopback interface
// unless a proxy terminates TLS, and tlsconfig.CheckPostgres refuses a
// PostgreSQL store or source on another host reached without TLS.
// Analyst-facing errors are computed from the request, the public schema and
// policy, and the analyst's own budget; anything else (which could depend on
// the data) is logged and reported as "internal error".
package server
